package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/suggest"
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
			return nil, usageErrorf("%s: %s%s (see enqueue %s --help)", fs.Name(), flagErrorText(fs, err), flagSuggestion(fs, err), fs.Name())
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
	url := cmp.Or(f.url, a.env.Getenv("SLUICE_NATS_URL"))
	if err := natsURLScheme(url); err != nil {
		return nil, err
	}
	return jobclient.Dial(ctx, jobclient.Config{
		URL:      url,
		Security: sec,
		Now:      a.env.Now,
	})
}

// natsURLScheme refuses at once a NATS URL whose scheme is not NATS's (an
// http:// address copied from a monitoring page), which would otherwise
// fail as "no servers available" after the connection attempts.
func natsURLScheme(urls string) error {
	for _, u := range strings.Split(urls, ",") {
		scheme, _, ok := strings.Cut(strings.TrimSpace(u), "://")
		if ok && !slices.Contains([]string{"nats", "tls", "ws", "wss"}, strings.ToLower(scheme)) {
			return usageErrorf("--nats-url (or SLUICE_NATS_URL): %s is not a NATS URL: want nats://HOST:4222 (or tls://, ws://, wss://)", redact.URL(strings.TrimSpace(u)))
		}
	}
	return nil
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

// oneDashFlag is a flag named with one dash in the flag package's errors
// ("for flag -since", "not defined: -tenantt").
var oneDashFlag = regexp.MustCompile(`(flag|defined:|argument:) -([A-Za-z0-9][A-Za-z0-9-]+)`)

// flagErrorText is the flag package's error as this CLI writes flags, with
// two dashes, and with an example of a duration when one was bad.
func flagErrorText(fs *flag.FlagSet, err error) string {
	text := oneDashFlag.ReplaceAllString(err.Error(), "$1 --$2")
	if m := oneDashFlag.FindStringSubmatch(err.Error()); m != nil && strings.HasPrefix(text, "invalid value") {
		if f := fs.Lookup(m[2]); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				if _, isDuration := g.Get().(time.Duration); isDuration {
					text = strings.TrimSuffix(text, ": parse error") + ": want a duration such as 24h, 90m or 30s"
				}
			}
		}
	}
	return text
}

// flagSuggestion returns "; did you mean --x?" when err is about an
// unknown flag whose name is close to one of fs's, else "".
func flagSuggestion(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return ""
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if best := suggest.Closest(name, names); best != "" {
		if len(best) == 1 {
			return "; did you mean -" + best + "?"
		}
		return "; did you mean --" + best + "?"
	}
	return ""
}
