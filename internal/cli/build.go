package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

// specFlags are the flags every flag-built spec has.
type specFlags struct {
	id, prefix string
	labels     labelFlag
}

func (f *specFlags) register(fs *flag.FlagSet) {
	f.labels = labelFlag{}
	fs.StringVar(&f.id, "id", "", "job id, ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$ (default: generated from kind, time and random bits)")
	fs.Var(f.labels, "label", "label `key=value`, echoed in every event (repeatable)")
	fs.StringVar(&f.prefix, "prefix", "", "output key prefix below the worker's S3 prefix, e.g. spring/clips")
}

func (f *specFlags) apply(s *jobspec.Spec) {
	s.Version = jobspec.Version
	s.ID = f.id
	if len(f.labels) > 0 {
		s.Labels = f.labels
	}
	if f.prefix != "" {
		s.Output = &jobspec.Output{Prefix: f.prefix}
	}
}

// flagNames maps spec field paths to the flags that set them.
type flagNames map[string]string

var commonFlagNames = flagNames{"id": "--id", "labels": "--label", "output": "--prefix", "output.prefix": "--prefix"}

// flagFor returns the flag of the longest known path that is path or
// encloses it, or "".
func (n flagNames) flagFor(path string) string {
	best, flagName := -1, ""
	for p, f := range n {
		if (path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[")) && len(p) > best {
			best, flagName = len(p), f
		}
	}
	return flagName
}

// specProblems turns a validation error of a flag-built spec into a usage
// error naming the flags.
func specProblems(kind jobspec.Kind, err error, names flagNames) error {
	var je *jobspec.Error
	if !errors.As(err, &je) {
		return err
	}
	lines := make([]string, 0, len(je.Problems))
	for _, p := range je.Problems {
		f := names.flagFor(p.Path)
		if f == "" {
			f = commonFlagNames.flagFor(p.Path)
		}
		switch {
		case f != "":
			lines = append(lines, fmt.Sprintf("  %s (%s): %s", f, p.Path, p.Rule))
		default:
			lines = append(lines, "  "+p.String())
		}
	}
	return usageErrorf("invalid %s job:\n%s", kind, strings.Join(lines, "\n"))
}

// runBuilt is the common tail of the video, speech and compute commands:
// validate the built spec, then publish (and wait) like submit.
func (a *app) runBuilt(ctx context.Context, spec *jobspec.Spec, names flagNames, pf *publishFlags) error {
	if err := pf.check(); err != nil {
		return err
	}
	sub, err := a.submission(spec, names)
	if err != nil {
		return err
	}
	return a.publish(ctx, []jobclient.Submission{sub}, nil, pf)
}

// submission validates a flag-built spec; its problems name the flags.
func (a *app) submission(spec *jobspec.Spec, names flagNames) (jobclient.Submission, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return jobclient.Submission{}, err
	}
	sub, err := jobclient.NewSubmission(data, a.newID)
	if err != nil {
		return jobclient.Submission{}, specProblems(spec.Kind, err, names)
	}
	return sub, nil
}

// noArgs rejects positional arguments.
func noArgs(cmd string, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s: unexpected argument %q (see enqueue %s --help)", cmd, args[0], cmd)
	}
	return nil
}
