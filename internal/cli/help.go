package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

const exitCodesHelp = `Exit codes:
  0    success (with --wait: every job succeeded)
  1    at least one job failed (cancel: a cancel was refused)
  2    usage error: bad flags, arguments or specs; nothing was published
  3    at least one job was cancelled, none failed
  4    --timeout passed before every job ended, none failed
  5    NATS unreachable, a publish not acknowledged, or another runtime error
  6    status, retry, dlq: no such job or dead letter
  7    submit --skip-invalid --wait: invalid specs were skipped, every
       published job succeeded
  8    submit: SLUICE_JOBS is full (a stream, account or server limit);
       the specs not published may be published again once it has room
  130  interrupted (Ctrl-C) while publishing or waiting
`

const envHelp = `Environment:
  SLUICE_NATS_URL        NATS server URL(s), comma-separated (default nats://127.0.0.1:4222)
  SLUICE_NATS_CREDS      NATS credentials file
  SLUICE_NATS_TLS_CA     CA bundle (PEM) that signs the servers' certificates; setting any TLS variable requires TLS
  SLUICE_NATS_TLS_CERT   client certificate (PEM) for mutual TLS, with SLUICE_NATS_TLS_KEY
  SLUICE_NATS_TLS_KEY    its private key (PEM)
`

func (a *app) topUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("enqueue publishes sluice jobs and follows them.\n\nUsage:\n  enqueue <command> [flags] [args]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-9s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Run "enqueue <command> --help" for a command's flags and examples, and
"enqueue --version" for the module version and VCS commit.

Examples:
  enqueue video --model M --prompt "a paper boat" --resolution 768P --duration 5 --ratio 16:9 --wait
  enqueue submit -f jobs.ndjson --wait --timeout 2h
  enqueue status clip-0001
  enqueue cancel clip-0001
  enqueue watch --kind video
  enqueue jobs --status failed --since 1h
  enqueue retry clip-0001 --wait
  enqueue dlq list

`)
	b.WriteString(exitCodesHelp)
	b.WriteString("\n")
	b.WriteString(envHelp)
	io.WriteString(w, b.String())
}

// help describes one command.
type help struct {
	usage    string
	about    string
	examples string
	exits    bool
}

// printer returns the function that prints the command's help, flags
// included.
func (h help) printer(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintf(w, "Usage:\n  %s\n\n%s\n\nFlags:\n", h.usage, strings.TrimSpace(h.about))
		printFlags(w, fs)
		fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(h.examples, "\n"))
		if h.exits {
			fmt.Fprintf(w, "\n%s", exitCodesHelp)
		}
		fmt.Fprintf(w, "\n%s", envHelp)
	}
}

const publishAbout = `
The spec is validated before anything is published (an error names the
flag and the rule), then published to sluice.jobs.<kind> with Nats-Msg-Id
set to the job id. Without --id an id is generated (kind, time, random).
Publishing the same --id again inside the stream's 1 h duplicate window is
reported as a duplicate and queues nothing.

With --wait, enqueue follows the job to its end, then prints its status and
artifacts (s3 URL, size, sha256) and exits with the codes below.`

// printFlags lists fs's flags in the double-dash spelling people type.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if len(f.Name) == 1 {
			line = "  -" + f.Name
		}
		if arg != "" && arg != "value" {
			line += " " + arg
		}
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "%s\n      %s\n", line, usage)
	})
}

// subcommandArgs is subcommand followed by parse of the rest: the
// subcommand and its positional arguments ("" when there is nothing more
// to do, err then being what to return).
func (a *app) subcommandArgs(fs *flag.FlagSet, h help, args []string) (sub string, rest []string, err error) {
	sub, args, err = a.subcommand(fs, h, args)
	if sub == "" {
		return "", nil, err
	}
	if rest, err = a.parse(fs, h.printer(fs), args); err != nil {
		return "", nil, err
	}
	return sub, rest, nil
}

// subcommand splits a command's subcommand off args. With none it prints
// the usage to stderr and returns the usage error; with "help" or "-h" it
// prints it to stdout; sub is "" in both cases, and err is what to return.
func (a *app) subcommand(fs *flag.FlagSet, h help, args []string) (sub string, rest []string, err error) {
	if len(args) == 0 {
		h.printer(fs)(a.env.Stderr)
		return "", nil, exitCode(ExitUsage)
	}
	if sub = args[0]; strings.TrimLeft(sub, "-") == "help" || sub == "-h" {
		h.printer(fs)(a.env.Stdout)
		return "", nil, nil
	}
	return sub, args[1:], nil
}
