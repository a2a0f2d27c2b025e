package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
)

// publishFlags are the flags of every publishing command.
type publishFlags struct {
	conn        connFlags
	wait        bool
	timeout     time.Duration
	dryRun      bool
	maxInFlight int
	skipInvalid bool
	asTenant    bool
}

func (f *publishFlags) register(fs *flag.FlagSet, bulk bool) {
	f.conn.register(fs)
	fs.BoolVar(&f.wait, "wait", false, "follow the job(s) to the end, print their artifacts, exit with the codes below")
	fs.DurationVar(&f.timeout, "timeout", 0, "with --wait: give up waiting after this long, exit 4 (e.g. 30m; default: wait for ever)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "validate and print the spec(s) as they would be published; publish nothing")
	fs.BoolVar(&f.asTenant, "as-tenant", false, "publish on the tenant subject of each job's tenant, sluice.jobs.<kind>.t.<tenant> (a bound tenant's jobs are accepted only there)")
	if bulk {
		fs.IntVar(&f.maxInFlight, "max-in-flight", 256, "most publishes awaiting their acknowledgement at once")
		fs.BoolVar(&f.skipInvalid, "skip-invalid", false, "publish the valid specs even when some are invalid (the invalid ones are reported)")
	}
}

// asTenant gives every submission its spec's tenant with --as-tenant,
// so that it is published on the tenant's subject; a spec naming no
// tenant is a usage error then.
func asTenant(subs []jobclient.Submission, pf *publishFlags) error {
	if !pf.asTenant {
		return nil
	}
	for i := range subs {
		tenant := jobclient.SpecTenant(subs[i].Data)
		if tenant == "" {
			return usageErrorf("--as-tenant: job %s names no tenant (give --tenant, or a tenant in its spec)", subs[i].ID)
		}
		subs[i].Tenant = tenant
	}
	return nil
}

// check rejects flag combinations that make no sense.
func (f *publishFlags) check() error {
	if f.timeout < 0 {
		return usageErrorf("--timeout must not be negative, got %s", f.timeout)
	}
	if f.timeout > 0 && !f.wait {
		return usageErrorf("--timeout needs --wait")
	}
	return nil
}

func runSubmit(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("submit")
	var (
		pf   publishFlags
		file string
	)
	fs.StringVar(&file, "f", "", "spec `FILE`: one JSON spec, or NDJSON (one spec per line); - reads stdin (required)")
	fs.StringVar(&file, "file", "", "same as -f `FILE`")
	pf.register(fs, true)
	h := help{
		usage: "enqueue submit -f FILE|- [--wait] [--timeout D] [--skip-invalid] [flags]",
		about: `Publish job specs from a file or stdin: one JSON document (it may span
lines), or NDJSON with one spec per line; docs/job-spec.md in sluice's
repository describes the fields and rules. Every spec is validated before
anything is published; an invalid one is reported with its line number and
field, and then nothing is published unless --skip-invalid is given (with
--wait, exit 7 then tells that some were skipped). Two specs with the same
id are an error too.

Each spec is published to sluice.jobs.<kind> with Nats-Msg-Id = its id, so
running the same file again inside the 1 h duplicate window queues nothing
new: enqueue reports "N published, M duplicates". A spec WITHOUT an id gets
a generated one written into it, so running a file without ids again DOES
queue every job again. Give ids when re-runs must be safe.

With --wait, enqueue follows every job to its end, then prints each job's
status and artifacts (s3 URL, size, sha256) and exits with the codes below.`,
		examples: `  enqueue submit -f clip.json --wait
  enqueue submit -f jobs.ndjson --timeout 2h --wait
  generate-specs | enqueue submit -f - --skip-invalid --json
  enqueue submit -f jobs.ndjson --dry-run      # validate only`,
		exits: true,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := specFileArgs("submit", file, rest, &pf); err != nil {
		return err
	}
	if pf.maxInFlight < 1 {
		return usageErrorf("--max-in-flight must be at least 1, got %d", pf.maxInFlight)
	}
	subs, invalid, err := a.readSpecFile(ctx, "submit", file, &pf)
	if err != nil {
		return err
	}
	return a.publish(ctx, subs, invalid, &pf)
}

// specFileArgs checks the arguments of a command that reads -f FILE.
func specFileArgs(cmd, file string, rest []string, pf *publishFlags) error {
	if err := noFileArgs(cmd, rest); err != nil {
		return err
	}
	if file == "" {
		return usageErrorf("%s: -f FILE is required (- for stdin)", cmd)
	}
	return pf.check()
}

// readSpecFile reads cmd's -f FILE (or stdin for "-"), checking video
// specs against the model catalog in force.
func (a *app) readSpecFile(ctx context.Context, cmd, file string, pf *publishFlags) ([]jobclient.Submission, []*jobclient.InvalidSpec, error) {
	in, closeIn, err := a.openSpecs(cmd, file)
	if err != nil {
		return nil, nil, err
	}
	defer closeIn()
	cat, err := a.catalog(ctx, pf)
	if err != nil {
		return nil, nil, err
	}
	subs, invalid, err := jobclient.ReadSpecs(in, a.newID, cat)
	if errors.Is(err, jobclient.ErrNoSpecs) {
		return nil, nil, usageErrorf("%s: %s: %v", cmd, fileName(file), err)
	}
	return subs, invalid, err
}

func fileName(f string) string {
	if f == "-" {
		return "stdin"
	}
	return f
}

// submitReport is the JSON output of a publishing command.
type submitReport struct {
	Published    int             `json:"published"`
	Duplicates   int             `json:"duplicates"`
	Failed       int             `json:"failed"`
	Invalid      int             `json:"invalid"`
	Jobs         []jobReport     `json:"jobs"`
	InvalidSpecs []invalidReport `json:"invalid_specs"`
	Wait         *waitReport     `json:"wait,omitempty"`
}

type jobReport struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"`
	Line        int    `json:"line,omitempty"`
	Duplicate   bool   `json:"duplicate"`
	GeneratedID bool   `json:"generated_id"`
	Error       string `json:"error,omitempty"`
}

type invalidReport struct {
	// Line is the spec's line in the input; absent for a job built from
	// flags.
	Line     int             `json:"line,omitempty"`
	ID       string          `json:"id,omitempty"`
	Problems []problemReport `json:"problems"`
}

type problemReport struct {
	Path string `json:"path"`
	Rule string `json:"rule"`
	// Flag names the flag that sets Path, for a job built from flags.
	Flag string `json:"flag,omitempty"`
	// flagOnly: the flag's value itself was refused (printed as
	// "--flag: rule").
	flagOnly bool
}

type waitReport struct {
	// Outcome is succeeded, failed, cancelled, timeout, interrupted or
	// error.
	Outcome string           `json:"outcome"`
	Counts  jobclient.Counts `json:"counts"`
	Jobs    []jobclient.Job  `json:"jobs"`
}

// maxListed bounds the invalid specs and failures listed as text.
const maxListed = 50

// publish publishes valid specs (after reporting invalid ones) and, with
// --wait, waits for them.
func (a *app) publish(ctx context.Context, subs []jobclient.Submission, invalid []*jobclient.InvalidSpec, pf *publishFlags) error {
	rep := &submitReport{Jobs: []jobReport{}, InvalidSpecs: []invalidReport{}, Invalid: len(invalid)}
	for _, inv := range invalid {
		ir := invalidReport{Line: inv.Line, ID: inv.ID, Problems: []problemReport{}}
		for _, p := range inv.Problems() {
			ir.Problems = append(ir.Problems, problemReport{Path: p.Path, Rule: p.Rule})
		}
		rep.InvalidSpecs = append(rep.InvalidSpecs, ir)
	}
	if len(invalid) > 0 {
		a.listInvalid(invalid, pf.skipInvalid && len(subs) > 0)
		if !pf.skipInvalid || len(subs) == 0 {
			if pf.conn.json {
				_ = writeJSON(a.env.Stdout, rep)
			}
			return exitCode(ExitUsage)
		}
	}
	a.warnUnknownModels(subs)
	if err := asTenant(subs, pf); err != nil {
		return err
	}
	if pf.dryRun {
		return a.dryRun(subs, rep, pf)
	}

	// Events from here on count for --wait: taken before publishing, so a
	// job that ends at once is not missed.
	since := a.env.Now()
	client, err := a.dial(ctx, &pf.conn)
	if err != nil {
		return err
	}
	defer client.Close()

	pb := a.newBar(pf.conn.json, len(subs), "publishing")
	if len(subs) < 2 {
		pb = nil
	}
	tctx, tr, opts, err := a.startTracing(ctx, jobclient.PublishOptions{
		MaxInFlight: pf.maxInFlight,
		OnResult:    func(jobclient.Published) { pb.add(1) },
	})
	if err != nil {
		return err
	}
	res, perr := client.Publish(tctx, subs, opts)
	pb.done()
	a.stopTracing(ctx, tr)
	if res == nil {
		return perr
	}
	rep.Published, rep.Duplicates, rep.Failed = res.Published, res.Duplicates, res.Failed
	rerunSafe := true
	for i, p := range res.Jobs { // in submission order
		jr := jobReport{ID: p.ID, Kind: string(p.Kind), Line: p.Line, Duplicate: p.Duplicate, GeneratedID: subs[i].GeneratedID}
		if p.Err != nil {
			jr.Error = p.Err.Error()
		}
		rerunSafe = rerunSafe && !subs[i].GeneratedID
		rep.Jobs = append(rep.Jobs, jr)
	}
	if !pf.conn.json {
		a.printPublished(res, len(invalid))
	}
	if perr != nil || res.Failed > 0 {
		if pf.conn.json {
			_ = writeJSON(a.env.Stdout, rep)
		}
		if perr != nil {
			return perr
		}
		advice := "publishing the same input again is safe: its ids are deduplicated"
		if !rerunSafe {
			advice = "some specs had no id, so publishing the same input again queues those jobs again"
		}
		if full := jobsFull(res); full != nil {
			return &exitError{code: ExitJobsFull, err: fmt.Errorf("%d of %d specs were not published: %v; %s", res.Failed, len(subs), full, advice)}
		}
		return &exitError{code: ExitRuntime, err: fmt.Errorf("%d of %d specs were not published; %s", res.Failed, len(subs), advice)}
	}
	if !pf.wait {
		if pf.conn.json {
			return writeJSON(a.env.Stdout, rep)
		}
		return nil
	}
	err = a.wait(ctx, client, subs, since, pf, func(w *waitReport) error {
		rep.Wait = w
		return writeJSON(a.env.Stdout, rep)
	})
	if err == nil && len(invalid) > 0 {
		// Every published job succeeded, but not every spec was
		// published: a script must be able to tell.
		return &exitError{code: ExitSkipped, err: fmt.Errorf("%d invalid spec(s) were skipped (listed above); every published job succeeded", len(invalid))}
	}
	return err
}

// jobsFull returns the first refusal of a full SLUICE_JOBS among res's
// publishes, or nil.
func jobsFull(res *jobclient.PublishResult) *jobclient.JobsFullError {
	for _, p := range res.Jobs {
		if full, ok := errors.AsType[*jobclient.JobsFullError](p.Err); ok {
			return full
		}
	}
	return nil
}

// listInvalid prints the invalid specs to stderr.
func (a *app) listInvalid(invalid []*jobclient.InvalidSpec, skipping bool) {
	w := a.env.Stderr
	if skipping {
		fmt.Fprintf(w, "enqueue: skipping %d invalid spec(s):\n", len(invalid))
	} else {
		fmt.Fprintf(w, "enqueue: %d invalid spec(s); nothing was published (--skip-invalid publishes the valid ones):\n", len(invalid))
	}
	for i, inv := range invalid {
		if i == maxListed {
			fmt.Fprintf(w, "  ... and %d more\n", len(invalid)-i)
			break
		}
		fmt.Fprintf(w, "  %v\n", inv)
	}
}

// printPublished prints the publish summary.
func (a *app) printPublished(res *jobclient.PublishResult, skipped int) {
	w := a.env.Stdout
	if len(res.Jobs) == 1 && skipped == 0 {
		p := res.Jobs[0]
		switch {
		case p.Err != nil:
		case p.Duplicate:
			fmt.Fprintf(w, "%s job %s was already published within the last hour: not queued again (duplicate)\n", p.Kind, p.ID)
		default:
			fmt.Fprintf(w, "published %s job %s\n", p.Kind, p.ID)
		}
	} else {
		var extra []string
		if res.Failed > 0 {
			extra = append(extra, fmt.Sprintf("%d failed", res.Failed))
		}
		if skipped > 0 {
			extra = append(extra, fmt.Sprintf("%d invalid skipped", skipped))
		}
		fmt.Fprintf(w, "%d published, %d duplicates", res.Published, res.Duplicates)
		if len(extra) > 0 {
			fmt.Fprintf(w, ", %s", strings.Join(extra, ", "))
		}
		fmt.Fprintln(w)
	}
	n := 0
	for _, p := range res.Jobs {
		if p.Err == nil {
			continue
		}
		if n == maxListed {
			fmt.Fprintf(a.env.Stderr, "  ... and %d more\n", res.Failed-n)
			break
		}
		n++
		fmt.Fprintf(a.env.Stderr, "enqueue: line %d: %v\n", p.Line, p.Err)
	}
}

// dryRun prints the specs as they would be published.
func (a *app) dryRun(subs []jobclient.Submission, rep *submitReport, pf *publishFlags) error {
	if pf.conn.json {
		for _, s := range subs {
			rep.Jobs = append(rep.Jobs, jobReport{ID: s.ID, Kind: string(s.Kind), Line: s.Line, GeneratedID: s.GeneratedID})
		}
		return writeJSON(a.env.Stdout, rep)
	}
	for _, s := range subs {
		fmt.Fprintf(a.env.Stdout, "%s\n", s.Data)
	}
	fmt.Fprintf(a.env.Stderr, "enqueue: dry run: %d valid spec(s), nothing published\n", len(subs))
	return nil
}

// wait follows the published jobs to their end and prints the outcome;
// with --json, report writes it.
func (a *app) wait(ctx context.Context, client *jobclient.Client, subs []jobclient.Submission, since time.Time, pf *publishFlags, report func(*waitReport) error) error {
	targets := make([]jobclient.Target, len(subs))
	for i, s := range subs {
		targets[i] = jobclient.Target{ID: s.ID, Kind: s.Kind}
	}
	wctx := ctx
	if pf.timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeoutCause(ctx, pf.timeout, jobclient.ErrTimeout)
		defer cancel()
	}
	onProgress, wb := a.waitProgress(pf.conn.json, len(targets))
	res, err := client.Wait(wctx, targets, jobclient.WaitOptions{
		Since:      since,
		OnProgress: onProgress,
		OnRetrying: a.waitRetrying(pf.conn.json),
		OnNotSetUp: func() {
			fmt.Fprintf(a.env.Stderr, "enqueue: %v; waiting for one (the jobs stay queued)\n", jobclient.ErrNotSetUp)
		},
	})
	wb.done()
	outcome, code := waitOutcome(res.Counts, err)
	if pf.conn.json {
		if werr := report(&waitReport{Outcome: outcome, Counts: res.Counts, Jobs: res.Jobs}); werr != nil {
			return werr
		}
	} else {
		for i := range res.Jobs {
			printJobLine(a.env.Stdout, &res.Jobs[i])
		}
		c := res.Counts
		fmt.Fprintf(a.env.Stdout, "%d succeeded, %d failed, %d cancelled, %d unfinished\n",
			c.Succeeded, c.Failed, c.Cancelled, c.Total-c.Done())
	}
	switch {
	case code == ExitTimeout:
		return &exitError{code: code, err: fmt.Errorf("timed out after %s with %d job(s) unfinished", pf.timeout, res.Counts.Total-res.Counts.Done())}
	case code == ExitInterrupted:
		return &exitError{code: code, err: errors.New("interrupted while waiting; the jobs go on")}
	case code == ExitRuntime:
		return &exitError{code: code, err: err}
	case code != ExitOK:
		return exitCode(code)
	}
	return nil
}

// waitOutcome names how a wait ended and its exit code: failed wins over
// an unfinished job, which wins over cancelled.
func waitOutcome(c jobclient.Counts, err error) (string, int) {
	switch {
	case c.Failed > 0:
		return "failed", ExitFailed
	case c.Done() < c.Total && errors.Is(err, jobclient.ErrTimeout):
		return "timeout", ExitTimeout
	case c.Done() < c.Total && errors.Is(err, context.Canceled):
		return "interrupted", ExitInterrupted
	case c.Done() < c.Total:
		return "error", ExitRuntime
	case c.Cancelled > 0:
		return "cancelled", ExitCancelled
	default:
		return "succeeded", ExitOK
	}
}
