package jobclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobqueue"
	"github.com/sluice-dev/sluice/internal/state"
)

// CancelOutcome says what a cancel request achieved.
type CancelOutcome string

// The outcomes of Cancel.
const (
	// CancelRequested: the job is known to a worker and its cancel flag
	// is set.
	CancelRequested CancelOutcome = "requested"
	// CancelRecorded: the job waits in SLUICE_JOBS and no worker has seen
	// it yet; the flag is set and the first worker to receive the job ends
	// it as cancelled without submitting it.
	CancelRecorded CancelOutcome = "recorded"
	// CancelNoSuchJob: the job is neither recorded nor waiting in
	// SLUICE_JOBS (a wrong id, or a job not published yet). The cancel is
	// kept as pending: it stops a job with this id published within
	// state.PendingCancelTTL, and is ignored after. It is not a job: status
	// still says "no such job".
	CancelNoSuchJob CancelOutcome = "no_such_job"
	// CancelTerminal: the job had already ended; nothing changed.
	CancelTerminal CancelOutcome = "terminal"
	// CancelRefused: the job cannot be cancelled any more (a compute job
	// already submitted: the platform has no cancel operation); nothing
	// changed.
	CancelRefused CancelOutcome = "refused"
)

// CancelOptions tunes Cancel.
type CancelOptions struct {
	// ReplyTimeout bounds the wait for a worker's answer on
	// sluice.control.cancel. Defaults to 2s.
	ReplyTimeout time.Duration
}

// CancelResult is the outcome of one Cancel.
type CancelResult struct {
	// JobID is the job the request was for.
	JobID string `json:"job_id"`
	// Outcome says what the request achieved.
	Outcome CancelOutcome `json:"outcome"`
	// Reason says why a cancel was refused.
	Reason string `json:"reason,omitempty"`
	// Status is the job's status in the record when the flag was set
	// (queued when no worker has seen the job).
	Status string `json:"status"`
	// Reply is the worker's answer; nil when no worker answered in time
	// (the flag is set all the same) or none was asked.
	Reply *contract.CancelReply `json:"worker_reply"`
}

// Cancel sets the cancel flag of job id in SLUICE_STATE (creating the
// record, and the bucket, when no worker has seen the job yet) and then
// tells the workers on sluice.control.cancel, as a core NATS request. No
// answer is not an error: the flag is what counts. A job that has already
// ended is left as it is and nobody is told; so is a compute job already
// submitted, which the compute platform cannot cancel (CancelRefused). A
// job that is neither recorded nor waiting in SLUICE_JOBS gets a pending
// cancel only (CancelNoSuchJob).
func (c *Client) Cancel(ctx context.Context, id string, o CancelOptions) (*CancelResult, error) {
	o.ReplyTimeout = cmp.Or(o.ReplyTimeout, 2*time.Second)
	store, err := c.stateStore(ctx, true)
	if err != nil {
		return nil, err
	}
	exists, err := c.exists(ctx, store, id)
	if err != nil {
		return nil, err
	}
	rec, err := store.RequestCancel(ctx, id)
	if errors.Is(err, state.ErrNotCancellable) {
		return &CancelResult{JobID: id, Outcome: CancelRefused, Reason: err.Error(), Status: string(rec.Status)}, nil
	}
	if err != nil {
		return nil, c.jsErr(err)
	}
	job := JobFromRecord(rec)
	res := &CancelResult{JobID: id, Status: job.Status}
	switch {
	case rec.Status.Terminal():
		res.Outcome = CancelTerminal
		return res, nil
	case !exists && rec.Status == "":
		// (A worker that took the job since has given it a status.)
		res.Outcome = CancelNoSuchJob
		return res, nil
	case rec.Status == "":
		res.Outcome = CancelRecorded
	default:
		res.Outcome = CancelRequested
	}
	// The worker's answer may already say "terminal": the job can end,
	// because of this very request, before the answer is sent.
	res.Reply = c.askWorkers(ctx, id, o.ReplyTimeout)
	return res, nil
}

// exists reports whether job id is known to a worker (its record has a
// status) or waits in SLUICE_JOBS. The record is read again after the
// queue: a worker writes it before its message leaves the queue, so a job
// taken and finished meanwhile is still found.
func (c *Client) exists(ctx context.Context, store *state.Store, id string) (bool, error) {
	seen := func() (bool, error) {
		rec, _, err := store.Get(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, c.jsErr(err)
		}
		return rec.Status != "", nil
	}
	if ok, err := seen(); ok || err != nil {
		return ok, err
	}
	_, err := jobqueue.Find(ctx, c.js, id)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, jobqueue.ErrNotWaiting) {
		return false, c.jsErr(err)
	}
	return seen()
}

// askWorkers sends the control request and returns the first answer, or
// nil when none came (no responders, timeout, or an unreadable answer).
func (c *Client) askWorkers(ctx context.Context, id string, timeout time.Duration) *contract.CancelReply {
	body, err := json.Marshal(contract.CancelRequest{JobID: id})
	if err != nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := c.nc.RequestWithContext(rctx, contract.CancelSubject, body)
	if err != nil {
		// nats.ErrNoResponders (no worker runs) and a timeout alike: the
		// flag is set, and a worker acts on it when it gets the job.
		return nil
	}
	var r contract.CancelReply
	if json.Unmarshal(msg.Data, &r) != nil {
		return &contract.CancelReply{JobID: id, Error: fmt.Sprintf("unreadable answer (%d bytes)", len(msg.Data))}
	}
	return &r
}
