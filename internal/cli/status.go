package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/tenants"
)

// jobIDs checks the ids given to status and cancel.
func jobIDs(cmd string, ids []string) error {
	if len(ids) == 0 {
		return usageErrorf("%s: at least one job id is required (see enqueue %s --help)", cmd, cmd)
	}
	for _, id := range ids {
		if !jobspec.ValidID(id) {
			return usageErrorf("%s: %q is not a job id (^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$)", cmd, id)
		}
	}
	return nil
}

func runStatus(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("status")
	var cf connFlags
	cf.register(fs)
	h := help{
		usage: "enqueue status [flags] ID...",
		about: `Show each job's state record: status, attempts, upstream ids, artifacts
(s3 URL, size, sha256) and error. The record's result URLs are never shown.
A job no worker has seen yet is "queued" while its message waits in
SLUICE_JOBS (finding it reads the waiting messages, one request each, when
the id has no record); an id that is neither recorded nor waiting is "no
such job".

With --json, one JSON object per id, one per line; an unknown id gives
{"job_id":"...","error":"no such job"}.

Exit codes: 0 every job was found, 6 some job was not, 2 usage error,
5 NATS unreachable or another runtime error.`,
		examples: `  enqueue status clip-0001
  enqueue status clip-0001 clip-0002 --json | jq .status`,
	}
	ids, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	if err := jobIDs("status", ids); err != nil {
		return err
	}
	client, err := a.dial(ctx, &cf)
	if err != nil {
		return err
	}
	defer client.Close()
	missing := 0
	for i, id := range ids {
		job, err := client.Status(ctx, id)
		switch {
		case errors.Is(err, jobclient.ErrNotSetUp):
			return &exitError{code: ExitNoSuchJob, err: fmt.Errorf("%w: no job has a record", err)}
		case errors.Is(err, jobclient.ErrNoSuchJob):
			missing++
			if cf.json {
				_ = writeJSON(a.env.Stdout, struct {
					JobID string `json:"job_id"`
					Error string `json:"error"`
				}{id, jobclient.ErrNoSuchJob.Error()})
			} else {
				fmt.Fprintf(a.env.Stderr, "enqueue: no such job %s (not recorded and not waiting in %s; or its record expired)\n", id, contract.JobsStream)
			}
			continue
		case err != nil:
			return err
		}
		if cf.json {
			if err := writeJSON(a.env.Stdout, job); err != nil {
				return err
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(a.env.Stdout)
		}
		printStatus(a.env.Stdout, job)
	}
	if missing > 0 {
		return exitCode(ExitNoSuchJob)
	}
	return nil
}

// statusText is j's status, and what it waits for when it waits for its
// tenant's budget (nothing is submitted meanwhile).
func statusText(j *jobclient.Job) string {
	if j.WaitingFor == jobclient.WaitingForBudget {
		return j.Status + ", waiting for budget"
	}
	return j.Status
}

// printStatus writes a job as labelled lines.
func printStatus(w io.Writer, j *jobclient.Job) {
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-10s %s\n", k, v)
		}
	}
	fmt.Fprintf(w, "%s\n", j.ID)
	row("kind", j.Kind)
	row("status", statusText(j))
	row("tenant", j.Tenant)
	if j.Priority != 0 {
		row("priority", fmt.Sprint(j.Priority))
	}
	if j.Cost != nil {
		row("cost", tenants.Credits(*j.Cost)+" credits")
	}
	row("attempts", fmt.Sprint(j.Attempts))
	if j.CancelRequested {
		row("cancel", "requested")
	}
	row("upstream", upstreamText(j.Upstream))
	row("retrying", lastErrorText(j.LastError))
	if lines := errorLines(j.Error); len(lines) > 0 {
		row("error", lines[0])
		for _, l := range lines[1:] {
			row("", "  "+l)
		}
	}
	if len(j.Labels) > 0 {
		var ls []string
		for _, k := range slices.Sorted(maps.Keys(j.Labels)) {
			ls = append(ls, k+"="+j.Labels[k])
		}
		row("labels", strings.Join(ls, ", "))
	}
	row("created", timeText(j.CreatedAt))
	row("submitted", timeText(j.SubmittedAt))
	row("finished", timeText(j.FinishedAt))
	row("updated", timeText(j.UpdatedAt))
	row("worker", j.Worker)
	if len(j.Artifacts) > 0 {
		fmt.Fprintf(w, "  artifacts\n")
		printArtifacts(w, "    ", j.Artifacts)
	}
	if len(j.Steps) > 0 {
		fmt.Fprintf(w, "  steps\n")
		printSteps(w, "    ", j.Steps)
	}
}

func timeText(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
