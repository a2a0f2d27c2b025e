package jobclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

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
	// CancelRefused: the worker refused the cancel; nothing changed. Only
	// workers of older versions refuse one (a compute job already
	// submitted), during an upgrade.
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
	// (queued when no worker had seen the job).
	Status string `json:"status"`
	// Reply is the answer of the worker that set the flag; nil when no
	// worker answered and Cancel set the flag itself.
	Reply *contract.CancelReply `json:"worker_reply"`
}

// ErrCancelNotRecorded is returned (wrapped, with the
// *PublishRefusedError) by Cancel when no worker answered and this client
// may not record the cancel itself either (a producer user without publish
// permission on SLUICE_STATE): nothing was recorded.
var ErrCancelNotRecorded = errors.New("nothing was recorded")

// Cancel asks the workers on sluice.control.cancel, as a core NATS
// request, to cancel job id. Every worker sets the job's cancel flag in
// SLUICE_STATE (creating the record when no worker has seen the job yet)
// and the one holding the job cancels it; the first answer is the
// outcome, which Cancel completes by reading the record and SLUICE_JOBS.
// Only when no worker answers (none runs, or none answered within
// ReplyTimeout) does Cancel set the flag itself, creating the bucket when
// it is missing; a user the server does not permit to write SLUICE_STATE
// then gets an error wrapping ErrCancelNotRecorded, without waiting for a
// timeout. The flag is what counts: a worker acts on it when it gets the
// job.
//
// A job that has already ended is left as it is (CancelTerminal); so is a
// compute job already submitted, which the compute platform cannot cancel
// (CancelRefused). A job that is neither recorded nor waiting in
// SLUICE_JOBS gets a pending cancel only (CancelNoSuchJob). A worker that
// answers with any other error (it could not record the cancel) makes
// Cancel return that error.
func (c *Client) Cancel(ctx context.Context, id string, o CancelOptions) (*CancelResult, error) {
	o.ReplyTimeout = cmp.Or(o.ReplyTimeout, 2*time.Second)
	reply, silence, err := c.askWorkers(ctx, id, o.ReplyTimeout)
	if err != nil {
		return nil, err
	}
	var status state.Status // the record's when the flag was set
	switch {
	case reply == nil:
		rec, err := c.recordCancel(ctx, id, silence)
		if errors.Is(err, state.ErrNotCancellable) {
			return &CancelResult{JobID: id, Outcome: CancelRefused, Reason: err.Error(), Status: string(rec.Status)}, nil
		}
		if err != nil {
			return nil, err
		}
		status = rec.Status
	case reply.Error != "" && strings.Contains(reply.Error, state.ErrNotCancellable.Error()):
		return &CancelResult{JobID: id, Outcome: CancelRefused, Reason: reply.Error, Status: reply.Status, Reply: reply}, nil
	case reply.Error != "":
		return nil, fmt.Errorf("a worker answered: %s", reply.Error)
	default:
		status = state.Status(reply.Status)
	}
	res := &CancelResult{JobID: id, Status: cmp.Or(string(status), StatusQueued), Reply: reply}
	switch {
	case status.Terminal():
		res.Outcome = CancelTerminal
		return res, nil
	case status != "":
		res.Outcome = CancelRequested
		return res, nil
	}
	// No worker had seen the job when the flag was set: it waits in
	// SLUICE_JOBS, or it is no job (yet). (A worker that took it since has
	// given it a status.)
	store, err := c.stateStore(ctx, false)
	if err != nil {
		return nil, err
	}
	exists, err := c.exists(ctx, store, id)
	if err != nil {
		return nil, err
	}
	res.Outcome = CancelRecorded
	if !exists {
		res.Outcome = CancelNoSuchJob
	}
	return res, nil
}

// recordCancel sets the cancel flag of job id itself, for Cancel when no
// worker answered (silence says how), and returns the record as
// state.Store.RequestCancel does. A worker acts on the flag when it gets
// the job.
func (c *Client) recordCancel(ctx context.Context, id, silence string) (*state.Record, error) {
	rctx, stop := c.refusable(ctx, kvSubject(contract.StateBucket, id), "$JS.API.STREAM.CREATE.KV_"+contract.StateBucket)
	defer stop()
	notRecorded := func(err error) error {
		refused := refusedBy(rctx)
		if refused == nil {
			return err
		}
		return fmt.Errorf("%s, and this user may not record the cancel in %s itself (%w): %w; retry when a worker runs",
			silence, contract.StateBucket, refused, ErrCancelNotRecorded)
	}
	store, err := c.stateStore(rctx, true)
	if err != nil {
		return nil, notRecorded(err)
	}
	rec, err := store.RequestCancel(rctx, id)
	if err != nil && !errors.Is(err, state.ErrNotCancellable) {
		return nil, notRecorded(c.jsErr(err))
	}
	return rec, err
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

// askWorkers sends the control request and returns the first answer. With
// no answer (no responders, a timeout) it returns nil and says how; an
// unreadable answer is an answer with an Error. It fails only when ctx
// ends.
func (c *Client) askWorkers(ctx context.Context, id string, timeout time.Duration) (*contract.CancelReply, string, error) {
	body, err := json.Marshal(contract.CancelRequest{JobID: id})
	if err != nil {
		return nil, "", err
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	msg, err := c.nc.RequestWithContext(rctx, contract.CancelSubject, body)
	switch {
	case ctx.Err() != nil:
		return nil, "", ctx.Err()
	case errors.Is(err, nats.ErrNoResponders):
		return nil, "no worker listens on " + contract.CancelSubject, nil
	case err != nil:
		// A worker that answers late records the cancel all the same.
		return nil, fmt.Sprintf("no worker answered on %s within %s", contract.CancelSubject, timeout), nil
	}
	var r contract.CancelReply
	if json.Unmarshal(msg.Data, &r) != nil {
		return &contract.CancelReply{JobID: id, Error: fmt.Sprintf("unreadable answer (%d bytes)", len(msg.Data))}, "", nil
	}
	return &r, "", nil
}
