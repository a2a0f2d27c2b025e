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
	"github.com/sluice-dev/sluice/internal/models"
)

// specFlags are the flags every flag-built spec has.
type specFlags struct {
	id, prefix, tenant string
	priority           int
	labels             labelFlag
}

func (f *specFlags) register(fs *flag.FlagSet) {
	f.labels = labelFlag{}
	fs.StringVar(&f.id, "id", "", "job id, ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$ (default: generated from kind, time and random bits)")
	fs.Var(f.labels, "label", "label `key=value`, echoed in every event (repeatable)")
	fs.StringVar(&f.prefix, "prefix", "", "output key prefix below the worker's S3 prefix, e.g. spring/clips")
	fs.StringVar(&f.tenant, "tenant", "", "who the job is for, an id (default: the tenant \"default\"; see docs/tenants.md)")
	fs.IntVar(&f.priority, "priority", 0, "1 (most urgent) to 5 (default 3)")
}

func (f *specFlags) apply(s *jobspec.Spec) {
	s.Version = jobspec.Version
	s.ID, s.Tenant, s.Priority = f.id, f.tenant, f.priority
	if len(f.labels) > 0 {
		s.Labels = f.labels
	}
	if f.prefix != "" {
		s.Output = &jobspec.Output{Prefix: f.prefix}
	}
}

// flagNames maps spec field paths to the flags that set them.
type flagNames map[string]string

var commonFlagNames = flagNames{"id": "--id", "labels": "--label", "output": "--prefix", "output.prefix": "--prefix",
	"tenant": "--tenant", "priority": "--priority"}

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

// flagProblem is a flag value refused before the spec is validated (a
// --template that is not TYPE/NAME, --nodes 0): it is reported with the
// spec's own problems, and replaces those of its field, which the flag
// left empty.
type flagProblem struct {
	flag, path, rule string
}

// builtProblems lists every problem of a flag-built spec: the flags'
// own first, then the spec's validation problems (err, when it is a
// *jobspec.Error) that no flag problem covers, each naming its flag.
func builtProblems(err error, names flagNames, bad []flagProblem) []problemReport {
	out := make([]problemReport, 0, len(bad))
	covered := map[string]bool{}
	for _, b := range bad {
		out = append(out, problemReport{Path: b.path, Rule: b.rule, Flag: b.flag, flagOnly: true})
		if b.path != "" {
			covered[b.path] = true
		}
	}
	var je *jobspec.Error
	if !errors.As(err, &je) {
		return out
	}
next:
	for _, p := range je.Problems {
		for c := range covered {
			if p.Path == c || strings.HasPrefix(p.Path, c+".") || strings.HasPrefix(p.Path, c+"[") {
				continue next
			}
		}
		f := names.flagFor(p.Path)
		if f == "" {
			f = commonFlagNames.flagFor(p.Path)
		}
		out = append(out, problemReport{Path: p.Path, Rule: p.Rule, Flag: f})
	}
	return out
}

// problemLine is one problem as text: "--flag (path): rule".
func problemLine(p problemReport) string {
	switch {
	case p.Flag != "" && (p.Path == "" || p.flagOnly):
		return fmt.Sprintf("%s: %s", p.Flag, p.Rule)
	case p.Flag != "" && p.Path != "":
		return fmt.Sprintf("%s (%s): %s", p.Flag, p.Path, p.Rule)
	case p.Path != "":
		return p.Path + ": " + p.Rule
	}
	return p.Rule
}

// runBuilt is the common tail of the video, speech, compute and container
// commands: validate the built spec, then publish (and wait) like submit.
func (a *app) runBuilt(ctx context.Context, spec *jobspec.Spec, names flagNames, pf *publishFlags, bad ...flagProblem) error {
	if err := pf.check(); err != nil {
		var ee *exitError
		if !errors.As(err, &ee) {
			return err
		}
		bad = append(bad, flagProblem{rule: ee.err.Error()})
	}
	sub, err := a.submission(ctx, spec, names, pf, bad)
	if err != nil {
		return err
	}
	return a.publish(ctx, []jobclient.Submission{sub}, nil, pf)
}

// submission validates a flag-built spec. An invalid spec is reported
// with every problem at once (the flags' own in bad, then the spec's),
// naming the flags, on stderr and, with --json, as the report's
// invalid_specs on stdout; nothing is published and the exit code is 2.
func (a *app) submission(ctx context.Context, spec *jobspec.Spec, names flagNames, pf *publishFlags, bad []flagProblem) (jobclient.Submission, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return jobclient.Submission{}, err
	}
	var cat *models.Catalog // only a video is checked against one
	if spec.Video != nil {
		if cat, err = a.catalog(ctx, pf); err != nil {
			return jobclient.Submission{}, err
		}
	}
	sub, err := jobclient.NewSubmission(data, a.newID, cat)
	var je *jobspec.Error
	if err != nil && !errors.As(err, &je) {
		return jobclient.Submission{}, err
	}
	if err == nil && len(bad) == 0 {
		return sub, nil
	}
	problems := builtProblems(err, names, bad)
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = "  " + problemLine(p)
	}
	fmt.Fprintf(a.env.Stderr, "enqueue: invalid %s job; nothing was published:\n%s\n", spec.Kind, strings.Join(lines, "\n"))
	if pf.conn.json {
		rep := &submitReport{Jobs: []jobReport{}, Invalid: 1, InvalidSpecs: []invalidReport{{ID: spec.ID, Problems: problems}}}
		_ = writeJSON(a.env.Stdout, rep)
	}
	return jobclient.Submission{}, exitCode(ExitUsage)
}

// noFileArgs rejects positional arguments of a command that reads its
// specs from -f, showing the -f form: a file named without it is the
// likely mistake.
func noFileArgs(cmd string, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s: unexpected argument %q; did you mean enqueue %s -f %s? (see enqueue %s --help)", cmd, args[0], cmd, args[0], cmd)
	}
	return nil
}

// noArgs rejects positional arguments.
func noArgs(cmd string, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s: unexpected argument %q (see enqueue %s --help)", cmd, args[0], cmd)
	}
	return nil
}
