package jobclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
)

// CancelOutcome says what a cancel request achieved.
type CancelOutcome string

// The outcomes of Cancel.
const (
	// CancelRequested: the job is known to a worker and its cancel flag
	// is set.
	CancelRequested CancelOutcome = "requested"
	// CancelRecorded: no worker has seen the job yet (it may still be
	// queued, or the id may be wrong); the flag is set and the first
	// worker to receive the job ends it as cancelled.
	CancelRecorded CancelOutcome = "recorded"
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
// submitted, which the compute platform cannot cancel (CancelRefused).
func (c *Client) Cancel(ctx context.Context, id string, o CancelOptions) (*CancelResult, error) {
	o.ReplyTimeout = cmp.Or(o.ReplyTimeout, 2*time.Second)
	store, err := c.stateStore(ctx, true)
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
