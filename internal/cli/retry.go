package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

// retryReport is the JSON output of retry and dlq replay.
type retryReport struct {
	Retries []jobclient.RetryResult `json:"retries"`
	Refused []refusal               `json:"refused"`
	Wait    *waitReport             `json:"wait,omitempty"`
}

// refusal is a job that was not run again, and why.
type refusal struct {
	JobID string `json:"job_id,omitempty"`
	Seq   uint64 `json:"seq,omitempty"`
	Error string `json:"error"`
}

// rerunFlags are the flags of retry and dlq replay.
type rerunFlags struct {
	pf    publishFlags
	force bool
}

func (f *rerunFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.force, "force", false, "also run again a job that succeeded, or one that ended submit_ambiguous (which MAY PAY TWICE)")
	fs.BoolVar(&f.pf.wait, "wait", false, "follow the new job(s) to the end, like video --wait, and exit with its codes")
	fs.DurationVar(&f.pf.timeout, "timeout", 0, "with --wait: give up waiting after this long, exit 4")
	fs.BoolVar(&f.pf.asTenant, "as-tenant", false, "publish on the tenant subject of each job's tenant (a bound tenant's jobs go there anyway when enqueue may read its settings)")
}

func runRetry(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("retry")
	var rf rerunFlags
	rf.pf.conn.register(fs)
	rf.register(fs)
	h := help{
		usage: "enqueue retry [--force] [--as-tenant] [--wait [--timeout D]] [--json] [flags] ID...",
		about: `Run jobs again. A retry of job X is a new job X-r<N> (N = 1, 2, ...) with X's
spec, kind and labels plus the label retry_of=X, so X's record, events,
artifacts and paid submissions stay as they were. sluice keeps every job's
spec as received for SLUICE_STATE_TTL (30 days by default): the id is all
enqueue needs.

A job must have ended failed or cancelled. A succeeded job is run again
only with --force. A job that failed submit_ambiguous (its submission may
have reached upstream) needs --force too: running it again MAY PAY TWICE.
Retrying the same job again while its retry is still queued reports the
queued retry as a duplicate and queues nothing. A retry of a job that
failed artifact_store_refused takes over the original's upstream task or
compute job instead of submitting again ("reuses" names it).

With --wait, enqueue follows the new jobs like "enqueue video --wait".
With --json, one object: {"retries":[{"job_id","retry_id","kind",
"duplicate","sequence","reuses"}],"refused":[{"job_id","error"}],"wait":{...}}.`,
		examples: `  enqueue retry clip-0001
  enqueue retry clip-0001 --wait --timeout 30m
  enqueue jobs --status failed --since 1h --json | jq -r '.jobs[].job_id' | xargs enqueue retry`,
		exits: true,
	}
	ids, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := jobIDs("retry", ids); err != nil {
		return err
	}
	if err := rf.pf.check(); err != nil {
		return err
	}
	tctx, tr, opts, err := a.startRerunTracing(ctx, rf.force, rf.pf.asTenant)
	if err != nil {
		return err
	}
	defer a.stopTracing(ctx, tr) // on a failure to ask; a second Shutdown does nothing
	since := a.env.Now()
	client, err := a.dial(ctx, &rf.pf.conn)
	if err != nil {
		return err
	}
	defer client.Close()
	rep := &retryReport{Retries: []jobclient.RetryResult{}, Refused: []refusal{}}
	missing := 0
	for _, id := range ids {
		res, err := client.Retry(tctx, id, opts)
		switch {
		case errors.Is(err, jobclient.ErrNoSuchJob):
			missing++
			a.refuse(rep, &rf.pf, refusal{JobID: id, Error: fmt.Sprintf("no such job %s (no worker has seen it, or its record expired)", id)})
			continue
		case isRefusal(err):
			a.refuse(rep, &rf.pf, refusal{JobID: id, Error: refusalText(err)})
			continue
		case err != nil:
			return notSetUp(err)
		}
		a.retried(rep, &rf.pf, res)
	}
	a.stopTracing(ctx, tr) // before --wait, which may be long
	code := ExitOK
	switch {
	case missing == len(ids):
		code = ExitNoSuchJob
	case len(rep.Refused) > 0:
		code = ExitFailed
	}
	return a.afterRerun(ctx, client, rep, &rf.pf, since, code)
}

// isRefusal reports whether err says a job may not be run again (as
// opposed to a failure to ask).
func isRefusal(err error) bool {
	return errors.Is(err, jobclient.ErrNotRetryable) || errors.Is(err, jobclient.ErrMayPayTwice)
}

// refusalText is a refusal's message, saying how to run the job anyway
// when --force would.
func refusalText(err error) string {
	if jobclient.NeedsForce(err) {
		return err.Error() + " (--force runs it anyway)"
	}
	return err.Error()
}

func (a *app) refuse(rep *retryReport, pf *publishFlags, r refusal) {
	rep.Refused = append(rep.Refused, r)
	if !pf.conn.json {
		fmt.Fprintf(a.env.Stderr, "enqueue: %s\n", r.Error)
	}
}

func (a *app) retried(rep *retryReport, pf *publishFlags, res *jobclient.RetryResult) {
	rep.Retries = append(rep.Retries, *res)
	if pf.conn.json {
		return
	}
	if res.Duplicate {
		fmt.Fprintf(a.env.Stdout, "retry %s of %s is already queued: not queued again (duplicate)\n", res.RetryID, res.JobID)
		return
	}
	if res.Reuses != "" {
		fmt.Fprintf(a.env.Stdout, "retrying %s as %s job %s, taking over its upstream result %s (not submitted again)\n",
			res.JobID, res.Kind, res.RetryID, res.Reuses)
		return
	}
	fmt.Fprintf(a.env.Stdout, "retrying %s as %s job %s\n", res.JobID, res.Kind, res.RetryID)
}

// afterRerun waits for the new jobs with --wait, then reports; code is
// the exit code when nothing is waited for.
func (a *app) afterRerun(ctx context.Context, client *jobclient.Client, rep *retryReport, pf *publishFlags, since time.Time, code int) error {
	if !pf.wait || len(rep.Retries) == 0 {
		if pf.conn.json {
			if err := writeJSON(a.env.Stdout, rep); err != nil {
				return err
			}
		}
		return exitCode(code)
	}
	subs := make([]jobclient.Submission, len(rep.Retries))
	for i, r := range rep.Retries {
		subs[i] = jobclient.Submission{ID: r.RetryID, Kind: jobspec.Kind(r.Kind)}
	}
	err := a.wait(ctx, client, subs, since, pf, func(w *waitReport) error {
		rep.Wait = w
		return writeJSON(a.env.Stdout, rep)
	})
	if err == nil && code != ExitOK {
		return exitCode(code)
	}
	return err
}
