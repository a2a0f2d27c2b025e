package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/natsconn"
)

// newFlagSet returns a flag set that reports errors instead of exiting
// and prints nothing by itself; usage prints the command's help.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses args with fs, allowing flags after positional arguments
// ("status ID --json"); everything after "--" is positional. --help prints
// help to stdout and ends the command with exit 0.
func (a *app) parse(fs *flag.FlagSet, help func(io.Writer), args []string) ([]string, error) {
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			help(a.env.Stdout)
			return nil, exitCode(ExitOK)
		}
		if err != nil {
			return nil, usageErrorf("%s: %v (see enqueue %s --help)", fs.Name(), err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// labelFlag is a repeatable k=v flag.
type labelFlag map[string]string

func (l labelFlag) String() string { return "" }
func (l labelFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	if _, dup := l[k]; dup {
		return fmt.Errorf("label %q given twice", k)
	}
	l[k] = val
	return nil
}

// optBool is a boolean flag that remembers whether it was given.
type optBool struct {
	set, value bool
}

func (b *optBool) String() string   { return strconv.FormatBool(b.value) }
func (b *optBool) IsBoolFlag() bool { return true }
func (b *optBool) Set(v string) error {
	x, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("want true or false")
	}
	b.set, b.value = true, x
	return nil
}

// ptr returns nil when the flag was not given.
func (b *optBool) ptr() *bool {
	if !b.set {
		return nil
	}
	v := b.value
	return &v
}

// connFlags are the NATS connection flags every command has.
type connFlags struct {
	url, creds string
	json       bool
}

func (f *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "nats-url", "", "NATS server URL(s), comma-separated (default $SLUICE_NATS_URL, else "+jobclient.DefaultURL+")")
	fs.StringVar(&f.creds, "creds", "", "NATS credentials file (default $SLUICE_NATS_CREDS)")
	fs.BoolVar(&f.json, "json", false, "print JSON for scripts instead of text")
}

// dial connects with the flags, falling back to the environment. The
// credentials and TLS files are checked first: a missing or unreadable one
// is a usage error naming its flag or variable.
func (a *app) dial(ctx context.Context, f *connFlags) (*jobclient.Client, error) {
	sec := natsconn.FromEnv(a.env.Getenv)
	sec.CredsFile = cmp.Or(f.creds, sec.CredsFile)
	if sec.CredsFile != "" {
		if _, err := os.Stat(sec.CredsFile); err != nil {
			return nil, usageErrorf("--creds (or SLUICE_NATS_CREDS): %v", err)
		}
	}
	if _, err := sec.Options(); err != nil {
		return nil, usageErrorf("%v", err)
	}
	return jobclient.Dial(ctx, jobclient.Config{
		URL:      cmp.Or(f.url, a.env.Getenv("SLUICE_NATS_URL")),
		Security: sec,
		Now:      a.env.Now,
	})
}

// newID is the IDFunc of the run.
func (a *app) newID(kind string) (string, error) {
	return jobclient.NewID(kind, a.env.Now(), a.env.Rand)
}

// positiveDuration checks a duration flag.
func positiveDuration(name string, d time.Duration) error {
	if d < 0 {
		return usageErrorf("--%s must not be negative, got %s", name, d)
	}
	return nil
}
