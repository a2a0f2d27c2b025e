package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

func runJobs(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("jobs")
	var (
		cf     connFlags
		status string
		kind   string
		since  time.Duration
		limit  int
		tenant string
		stuck  bool
		labels = labelFlag{}
	)
	cf.register(fs)
	fs.StringVar(&status, "status", "", "only jobs whose latest status is this: "+strings.Join(jobclient.ListStatuses, ", "))
	fs.StringVar(&kind, "kind", "", "only jobs of this kind: video, speech, compute, container or pipeline")
	fs.StringVar(&tenant, "tenant", "", "only jobs of this tenant (\"default\" for jobs that name none)")
	fs.Var(labels, "label", "only jobs carrying this label, `key=value` (repeatable; all must match)")
	fs.DurationVar(&since, "since", 24*time.Hour, "only jobs active in this past period, e.g. 1h or 168h (events are kept 7 days by default)")
	fs.BoolVar(&stuck, "stuck", false, "only jobs a worker found stuck in their current step far longer than its bound, stuck longest first (reads every record of SLUICE_STATE)")
	fs.IntVar(&limit, "limit", 50, "print at most this many jobs, newest first (0: all)")
	h := help{
		usage: "enqueue jobs [--status S] [--kind K] [--tenant T] [--label k=v]... [--since D] [--stuck] [--limit N] [--json] [flags]",
		about: `List jobs, newest activity first, one line each: id, kind, status, age (time
since the job's latest event), attempts and error code.

A job's status is that of its latest event in SLUICE_EVENTS: submitted,
running, succeeded, failed or cancelled. A job with no event yet (queued,
or received and not yet submitted upstream) is not listed: "enqueue status
ID" shows it, and the web console counts them. The listing reads
only the events its filters select: JetStream filters them by subject
(sluice.events.<kind>.<status>) and by start time on the server, so
"--status failed --since 1h" reads the failed events of the last hour and
nothing else, never every record of SLUICE_STATE.

With --stuck, the jobs a worker's watchdog found in one step far longer
than the step's bound (SLUICE_STUCK_FACTOR times its deadline) and still
at it, whether or not they have an event: id, kind, step, how long since
they entered it, and the worker that found them. It reads the latest
record of every job in SLUICE_STATE; --since does not apply.

On a busy stream (more than 20,000 selected events) without --limit 0, only
the newest events are read, enough to fill the page.

With --json, one JSON object: {"jobs":[...],"matched":N,"complete":bool,
"since":"..."};
each job has the fields of "enqueue status --json".

Exit codes: 0 listed (even none), 2 usage error, 5 NATS unreachable, no
worker has set sluice up yet, or another runtime error.`,
		examples: `  enqueue jobs --status failed --since 1h
  enqueue jobs --kind video --label campaign=spring --limit 20
  enqueue jobs --status running --json | jq -r '.jobs[].job_id'
  enqueue jobs --stuck`,
	}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := noArgs("jobs", rest); err != nil {
		return err
	}
	opts := jobclient.ListOptions{Status: status, Kind: jobspec.Kind(kind), Labels: labels, Since: since, Limit: limit, Tenant: tenant, Stuck: stuck}
	switch {
	case tenant != "" && !jobspec.ValidID(tenant):
		return usageErrorf("--tenant: want an id matching ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$, got %q", tenant)
	case since <= 0:
		return usageErrorf("--since must be positive, got %s", since)
	case limit < 0:
		return usageErrorf("--limit must not be negative, got %d", limit)
	case limit == 0:
		opts.Limit = -1
	}
	if err := checkKind(kind); err != nil {
		return err
	}
	if status != "" && !slices.Contains(jobclient.ListStatuses, status) {
		return usageErrorf("--status: want one of %s, got %q", strings.Join(jobclient.ListStatuses, ", "), status)
	}
	client, err := a.dial(ctx, &cf)
	if err != nil {
		return err
	}
	defer client.Close()
	list, err := client.ListJobs(ctx, opts)
	if err != nil {
		return notSetUp(err)
	}
	if cf.json {
		return writeJSON(a.env.Stdout, list)
	}
	if stuck {
		printStuckList(a.env.Stdout, list, a.env.Now())
		return nil
	}
	printJobList(a.env.Stdout, list, a.env.Now())
	switch {
	case !list.Complete:
		fmt.Fprintf(a.env.Stderr, "enqueue: the newest %d jobs shown; more match (narrow with --status, --kind or --since, or --limit 0 for all)\n", len(list.Jobs))
	case len(list.Jobs) < list.Matched:
		fmt.Fprintf(a.env.Stderr, "enqueue: %d of %d jobs shown (--limit)\n", len(list.Jobs), list.Matched)
	}
	return nil
}

// checkKind checks a --kind flag.
func checkKind(kind string) error {
	if kind == "" {
		return nil
	}
	if _, err := jobspec.ParseKind(kind); err != nil {
		return usageErrorf("--kind: want video, speech, compute, container or pipeline, got %q", kind)
	}
	return nil
}

// printJobList writes a table of jobs.
func printJobList(w io.Writer, list *jobclient.JobList, now time.Time) {
	if len(list.Jobs) == 0 {
		fmt.Fprintf(w, "no jobs since %s\n", list.Since.Format(time.RFC3339))
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tAGE\tATTEMPTS\tERROR")
	for _, j := range list.Jobs {
		code := ""
		if j.Error != nil {
			code = j.Error.Code
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, j.Kind, statusText(&j), age(j.UpdatedAt, now), j.Attempts, code)
	}
	_ = tw.Flush()
}

// age is how long ago t was, short: 42s, 5m, 3h, 2d.
func age(t *time.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return jobclient.ShortDuration(now.Sub(*t))
}

// notSetUp turns jobclient.ErrNotSetUp into a clearer runtime error.
func notSetUp(err error) error {
	if errors.Is(err, jobclient.ErrNotSetUp) {
		return &exitError{code: ExitRuntime, err: fmt.Errorf("%w: start a worker first", err)}
	}
	return err
}

// printStuckList writes a table of stuck jobs.
func printStuckList(w io.Writer, list *jobclient.JobList, now time.Time) {
	if len(list.Jobs) == 0 {
		fmt.Fprintln(w, "no stuck jobs")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSTEP\tSTUCK FOR\tFOUND BY")
	for _, j := range list.Jobs {
		since := j.Stuck.Since
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.ID, j.Kind, j.Stuck.Step, age(&since, now), j.Stuck.Worker)
	}
	_ = tw.Flush()
}
