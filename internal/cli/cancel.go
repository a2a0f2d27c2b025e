package cli

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/internal/jobclient"
)

func runCancel(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("cancel")
	var cf connFlags
	cf.register(fs)
	h := help{
		usage: "enqueue cancel [flags] ID...",
		about: `Cancel jobs. For each id, enqueue sets the cancel flag in the job's state
record (this works with no worker running), then asks the workers on
sluice.control.cancel and shows the answer of the one holding the job.

A job no worker has seen yet (still queued, or a wrong id) gets a record
holding just the flag: "cancel recorded; no worker has seen job X yet". The
first worker to receive it ends it as cancelled without submitting it
upstream. This is not an error (exit 0), since cancelling a job right after
publishing it is normal; check the id if you did not expect it.

A job that has already ended is left as it is ("nothing to cancel"). A
compute job already submitted cannot be cancelled (the compute platform has
no cancel operation): it is left to run, and enqueue says so (exit 1).

With --json, one JSON object per id, one per line:
{"job_id","outcome":"requested"|"recorded"|"terminal"|"refused","reason",
"status","worker_reply"}.

Exit codes: 0 done, 1 a cancel was refused, 2 usage error, 5 NATS
unreachable or another runtime error.`,
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
	refused := 0
	for _, id := range ids {
		res, err := client.Cancel(ctx, id, jobclient.CancelOptions{})
		if err != nil {
			return fmt.Errorf("cancel %s: %w", id, err)
		}
		if res.Outcome == jobclient.CancelRefused {
			refused++
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
		case jobclient.CancelRecorded:
			fmt.Fprintf(w, "cancel recorded; no worker has seen job %s yet\n", id)
		default:
			fmt.Fprintf(w, "cancel requested for job %s (status %s)\n", id, res.Status)
		}
		switch r := res.Reply; {
		case r == nil:
			fmt.Fprintf(w, "  no worker answered; the flag is set and the worker holding the job will act on it\n")
		case r.Error != "":
			fmt.Fprintf(w, "  worker answered with an error: %s\n", r.Error)
		case r.Status != "":
			fmt.Fprintf(w, "  worker answered: cancel %s (status %s)\n", r.Cancel, r.Status)
		default:
			fmt.Fprintf(w, "  worker answered: cancel %s\n", r.Cancel)
		}
	}
	if refused > 0 {
		return exitCode(ExitFailed)
	}
	return nil
}
