// Package cli is the enqueue command line: it parses the subcommands and
// their flags, builds or reads job specs, drives internal/jobclient and
// prints what happened for people (or, with --json, for scripts). Its exit
// codes are part of its interface; see the Exit constants.
package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/suggest"
)

// Exit codes of enqueue. When jobs end differently, failed wins over
// timeout, and timeout over cancelled.
const (
	// ExitOK: everything succeeded.
	ExitOK = 0
	// ExitFailed: at least one job failed.
	ExitFailed = 1
	// ExitUsage: bad flags, arguments, specs, tenant settings or price
	// rules; nothing was published or written.
	ExitUsage = 2
	// ExitCancelled: at least one job was cancelled, none failed.
	ExitCancelled = 3
	// ExitTimeout: --timeout passed before every job ended.
	ExitTimeout = 4
	// ExitRuntime: NATS unreachable, a publish not acknowledged, or
	// another runtime error.
	ExitRuntime = 5
	// ExitNoSuchJob: status or cancel named a job that is neither recorded
	// nor waiting in SLUICE_JOBS.
	ExitNoSuchJob = 6
	// ExitSkipped: submit --skip-invalid --wait skipped invalid specs;
	// every published job succeeded (a failure, timeout or cancel wins).
	ExitSkipped = 7
	// ExitJobsFull: submit found SLUICE_JOBS full (its own, the account's
	// or the server's limit): at least one spec was not published.
	ExitJobsFull = 8
	// ExitInterrupted: interrupted (Ctrl-C) while publishing or waiting.
	ExitInterrupted = 130
)

// Env is what a run of the CLI sees of the world around it.
type Env struct {
	// Stdin is read by "submit -f -".
	Stdin io.Reader
	// Stdout gets the results; Stderr the progress and the errors.
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads an environment variable.
	Getenv func(string) string
	// IsTerminal reports whether w is an interactive terminal; progress
	// bars are drawn only on one.
	IsTerminal func(w io.Writer) bool
	// Now is the clock.
	Now func() time.Time
	// Rand is the source of the random part of generated job ids.
	Rand io.Reader
}

// OSEnv is the Env of the running process.
func OSEnv() Env {
	return Env{
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Getenv: os.Getenv,
		IsTerminal: func(w io.Writer) bool {
			f, ok := w.(*os.File)
			return ok && term.IsTerminal(int(f.Fd()))
		},
		Now:  time.Now,
		Rand: rand.Reader,
	}
}

// exitError carries an exit code; err (when not nil) is printed to stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is a usage error: exit code 2 and the message.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode returns code with nothing more to print: the command has
// already said what happened.
func exitCode(code int) error { return &exitError{code: code} }

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, a *app, args []string) error
}

func commands() []command {
	return []command{
		{"video", "publish a video job built from flags", runVideo},
		{"speech", "publish a speech job built from flags", runSpeech},
		{"compute", "publish a compute job built from flags", runCompute},
		{"container", "publish a container job built from flags", runContainer},
		{"submit", "publish job specs from a file or stdin (one spec, or NDJSON)", runSubmit},
		{"pipeline", "publish a pipeline spec: jobs run as the steps of a graph", runPipeline},
		{"status", "show jobs' state records", runStatus},
		{"cancel", "cancel jobs", runCancel},
		{"watch", "tail job events until Ctrl-C", runWatch},
		{"jobs", "list jobs by status, kind, label and time", runJobs},
		{"retry", "run ended jobs again as new jobs X-r<N>", runRetry},
		{"dlq", "list, show, replay or purge dead letters", runDLQ},
		{"quota", "show the fleet's upstream quotas in use and the jobs waiting for them", runQuota},
		{"tenants", "set and show tenants' weights, task caps and budgets", runTenants},
		{"prices", "set and show the price table of the budgets", runPrices},
		{"models", "show the video model catalog in force", runModels},
		{"spend", "show the credits spent by tenant, kind or label", runSpend},
		{"keys", "create, list and revoke the HTTP API's keys of a tenant", runKeys},
		{"webhooks", "add, list, rotate and remove webhook subscriptions; list and replay deliveries", runWebhooks},
	}
}

// app is one run of the CLI.
type app struct {
	env Env
	// models is the model catalog of the run, once read (catalog).
	models *models.Catalog
}

// Run runs enqueue with args (without the program name) and returns the
// exit code. ctx ends on an interrupt.
func Run(ctx context.Context, args []string, env Env) int {
	a := &app{env: env}
	if len(args) == 0 {
		a.topUsage(env.Stderr)
		return ExitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && name == "help" {
			return a.run(ctx, args[1], []string{"--help"})
		}
		a.topUsage(env.Stdout)
		return ExitOK
	case "-version", "--version", "version":
		fmt.Fprintf(env.Stdout, "enqueue %s\n", buildinfo.Read())
		return ExitOK
	}
	if strings.HasPrefix(name, "-") {
		args = globalFlagsAfter(args)
		name = args[0]
	}
	return a.run(ctx, name, args[1:])
}

// globalFlagsAfter moves the flags every command takes (--nats-url,
// --creds, --json), given before the command, to after it: enqueue
// --nats-url URL video ... is enqueue video ... --nats-url URL. Anything
// else before the command is left for the unknown-command message.
func globalFlagsAfter(args []string) []string {
	var moved []string
	for len(args) > 0 {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		if !strings.HasPrefix(args[0], "-") || !slices.Contains([]string{"nats-url", "creds", "json"}, name) {
			break
		}
		n := 1
		if name != "json" && !hasValue && len(args) > 1 {
			n = 2
		}
		moved, args = append(moved, args[:n]...), args[n:]
	}
	if len(args) == 0 || len(moved) == 0 {
		return append(moved, args...)
	}
	// After the command's own arguments, but before a "--" that ends them.
	rest := args[1:]
	end := slices.Index(rest, "--")
	if end < 0 {
		end = len(rest)
	}
	out := append([]string{args[0]}, rest[:end]...)
	out = append(out, moved...)
	return append(out, rest[end:]...)
}

func (a *app) run(ctx context.Context, name string, args []string) int {
	for _, c := range commands() {
		if c.name == name {
			return a.finish(ctx, c.run(ctx, a, args))
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	hint := ""
	if best := suggest.Closest(name, names); best != "" {
		hint = fmt.Sprintf("; did you mean %s?", best)
	}
	fmt.Fprintf(a.env.Stderr, "enqueue: unknown command %q%s (see enqueue --help)\n", name, hint)
	return ExitUsage
}

// finish turns a command's error into an exit code, printing it.
func (a *app) finish(ctx context.Context, err error) int {
	if err == nil {
		return ExitOK
	}
	code := ExitRuntime
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
		err = ee.err
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		code = ExitInterrupted
		err = errors.New("interrupted")
	}
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "enqueue: %v\n", err)
	}
	return code
}
