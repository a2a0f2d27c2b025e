package jobclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobqueue"
	"github.com/sluice-dev/sluice/internal/state"
)

// Status returns job id as its state record shows it, or, when no worker
// has seen the job yet, as queued while its message waits in SLUICE_JOBS
// (see jobqueue.Find for the cost of that look-up). It returns an error
// wrapping ErrNoSuchJob when the job is neither recorded nor waiting (a
// record that holds only a cancel of such an id does not make it a job),
// and one wrapping ErrNotSetUp when the bucket does not exist.
func (c *Client) Status(ctx context.Context, id string) (*Job, error) {
	var rec *state.Record
	store, notSetUp := c.stateStore(ctx, false)
	if notSetUp != nil && !errors.Is(notSetUp, ErrNotSetUp) {
		return nil, notSetUp
	}
	if notSetUp == nil {
		var err error
		rec, _, err = store.Get(ctx, id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			rec = nil
		case err != nil:
			return nil, c.jsErr(err)
		case rec.Status != "":
			j := JobFromRecord(rec)
			return &j, nil
		}
	}
	// No worker has seen the job (none may have run yet): it may wait.
	w, err := jobqueue.Find(ctx, c.js, id)
	if errors.Is(err, jobqueue.ErrNotWaiting) {
		if notSetUp != nil {
			return nil, notSetUp
		}
		return nil, fmt.Errorf("%w: %s", ErrNoSuchJob, id)
	}
	if err != nil {
		return nil, c.jsErr(err)
	}
	j := queuedJob(w, rec)
	if err := c.markBudgetWait(ctx, []*Job{j}); err != nil {
		return nil, err
	}
	return j, nil
}

// queuedJob is the Job of a message waiting in SLUICE_JOBS, with the
// cancel flag of rec when a cancel was requested for it. A message in a
// class queue names its tenant and priority.
func queuedJob(w *jobqueue.Waiting, rec *state.Record) *Job {
	published := w.Published
	j := Job{ID: w.JobID, Kind: w.Kind, Status: StatusQueued, Artifacts: []state.Artifact{}, CreatedAt: &published}
	if cl, ok := contract.ParseClassSubject(w.Subject); ok {
		j.Tenant, j.Priority = cl.Tenant, cl.Priority
	}
	if rec != nil {
		j.CancelRequested = rec.Cancel != nil
	}
	return &j
}

// markBudgetWait sets WaitingFor on the queued jobs whose tenant waits
// for budget: the scheduler starts none of that tenant's jobs until its
// budget has room again (docs/tenants.md#budgets).
func (c *Client) markBudgetWait(ctx context.Context, jobs []*Job) error {
	var queued []*Job
	for _, j := range jobs {
		if j.Status == StatusQueued && j.Tenant != "" {
			queued = append(queued, j)
		}
	}
	if len(queued) == 0 {
		return nil
	}
	v, err := c.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, j := range queued {
		if v.WaitingForBudget(j.Tenant) {
			j.WaitingFor = WaitingForBudget
		}
	}
	return nil
}

// record reads job id's state record: an error wrapping ErrNoSuchJob when
// there is none, one wrapping ErrNotSetUp when the bucket does not exist.
func (c *Client) record(ctx context.Context, id string) (*state.Record, error) {
	store, err := c.stateStore(ctx, false)
	if err != nil {
		return nil, err
	}
	rec, _, err := store.Get(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoSuchJob, id)
	}
	if err != nil {
		return nil, c.jsErr(err)
	}
	return rec, nil
}
