package cli

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/state"
)

func runCancel(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("cancel")
	var cf connFlags
	cf.register(fs)
	h := help{
		usage: "enqueue cancel [flags] ID...",
		about: `Cancel jobs. For each id, enqueue asks the workers on sluice.control.cancel:
each sets the cancel flag in the job's state record, the one holding the
job cancels it, and enqueue shows the first answer. When no worker answers
(none runs), enqueue sets the flag itself; a NATS user that may not write
SLUICE_STATE (the producer of config/nats/users.conf) then gets an error,
nothing is recorded, and the cancel must be retried when a worker runs
(exit 5).

A job still waiting in SLUICE_JOBS, which no worker has seen yet, gets the
flag too: "cancel recorded; no worker has seen job X yet" (exit 0). The
first worker to receive it ends it as cancelled without submitting it
upstream.

An id that is neither recorded nor waiting in SLUICE_JOBS (a wrong id, or
a job not published yet) is "no such job" (exit 6). The cancel is kept as
pending all the same: a job with that id published within the next 10
minutes ends cancelled; one published later runs. Publish first, then
cancel: a publish is acknowledged only once the job is stored, so
"enqueue video ... && enqueue cancel ID" always finds the job.

A job that has already ended is left as it is ("nothing to cancel"). A
compute job already submitted is deleted upstream by the worker holding it
and ends cancelled once the platform shows it so; one that ended first (or
runs on a platform without a cancel operation) keeps its own outcome.

With --json, one JSON object per id, one per line:
{"job_id","outcome":"requested"|"recorded"|"terminal"|"refused"|"no_such_job",
"reason","status","worker_reply"}.

Exit codes: 0 done, 1 a cancel was refused, 6 some id is no such job,
2 usage error, 5 NATS unreachable or another runtime error.`,
		examples: `  enqueue cancel clip-0001
  enqueue cancel clip-0001 clip-0002 --json`,
	}
	ids, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := jobIDs("cancel", ids); err != nil {
		return err
	}
	client, err := a.dial(ctx, &cf)
	if err != nil {
		return err
	}
	defer client.Close()
	refused, missing := 0, 0
	for _, id := range ids {
		res, err := client.Cancel(ctx, id, jobclient.CancelOptions{})
		if err != nil {
			return fmt.Errorf("cancel %s: %w", id, err)
		}
		switch res.Outcome {
		case jobclient.CancelRefused:
			refused++
		case jobclient.CancelNoSuchJob:
			missing++
		}
		if cf.json {
			if err := writeJSON(a.env.Stdout, res); err != nil {
				return err
			}
			continue
		}
		w := a.env.Stdout
		switch res.Outcome {
		case jobclient.CancelTerminal:
			fmt.Fprintf(w, "job %s already %s; nothing to cancel\n", id, res.Status)
			continue
		case jobclient.CancelRefused:
			fmt.Fprintf(a.env.Stderr, "enqueue: job %s not cancelled: %s\n", id, res.Reason)
			continue
		case jobclient.CancelNoSuchJob:
			fmt.Fprintf(a.env.Stderr, "enqueue: no such job %s: it is neither recorded nor waiting in %s; "+
				"the cancel stays pending for %s in case it is published\n", id, contract.JobsStream, state.PendingCancelTTL)
			continue
		case jobclient.CancelRecorded:
			fmt.Fprintf(w, "cancel recorded; no worker has seen job %s yet\n", id)
		default:
			fmt.Fprintf(w, "cancel requested for job %s (status %s)\n", id, res.Status)
		}
		switch r := res.Reply; {
		case r == nil:
			fmt.Fprintf(w, "  no worker answered; enqueue set the flag and the worker that gets the job will act on it\n")
		case r.Error != "":
			fmt.Fprintf(w, "  worker answered with an error: %s\n", r.Error)
		case r.Status != "":
			fmt.Fprintf(w, "  worker answered: cancel %s (status %s)\n", r.Cancel, r.Status)
		default:
			fmt.Fprintf(w, "  worker answered: cancel %s\n", r.Cancel)
		}
	}
	switch {
	case refused > 0:
		return exitCode(ExitFailed)
	case missing > 0:
		return exitCode(ExitNoSuchJob)
	}
	return nil
}
