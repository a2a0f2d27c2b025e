package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/state"
)

// Two deliveries can hold one job at once (a worker that runs on after its
// lease lapsed while NATS was out of reach; the same job id published
// twice outside the duplicate window). Every write of a job's record
// therefore names a fence: what must still hold of the current record for
// this delivery to write it. The write's change runs only past its fence,
// and compare-and-set makes the fence and the change one step.

// errAlreadyFinished refuses a write to a record another delivery has
// already finished.
var errAlreadyFinished = errors.New("job already finished by another delivery")

// errSuperseded stops a delivery whose job another delivery has taken over
// since this one started: it may not submit nor end the job failed or
// cancelled; it is redelivered later and then resumes from the record.
var errSuperseded = errors.New("another delivery of the job took it over meanwhile")

// A fence decides, on the current record, whether the delivery of the
// given attempt may write it: nil to write; state.Unchanged to leave it as
// it is (the write is there already, or is not this delivery's to make);
// errAlreadyFinished or errSuperseded to refuse.
type fence func(rec *state.Record, attempt int) error

// live: the job is not finished.
func live(rec *state.Record, _ int) error {
	if rec.Status.Terminal() {
		return errAlreadyFinished
	}
	return nil
}

// unmoved: the record is where this delivery found it, at status: no
// other delivery started since (Attempts) nor moved the job on. It guards
// the claim of a paid submit, so that at most one delivery sends it.
func unmoved(status state.Status) fence {
	return func(rec *state.Record, attempt int) error {
		if err := live(rec, attempt); err != nil {
			return err
		}
		if rec.Attempts != attempt || rec.Status != status {
			return errSuperseded
		}
		return nil
	}
}

// submitWindow: the record is still in the submit window ("submitting"),
// or names upstream id (idOf) already, a retry after a lost answer. Two
// deliveries inside one window each send a submit; the first to record
// its task wins and the other is superseded, its task left unrecorded
// upstream (the record's Submits counts it), so the artifacts are always
// those of the task the record and the terminal event name. An answer
// without an id (a synchronous speech answer may carry none) names
// nothing to find in the record: it is written while the record is in
// the window, or else superseded.
func submitWindow(id string, idOf func(*state.Record) string) fence {
	return func(rec *state.Record, attempt int) error {
		if err := live(rec, attempt); err != nil {
			return err
		}
		switch {
		case id != "" && idOf(rec) == id:
			return state.Unchanged
		case rec.Status != state.StatusSubmitting:
			return errSuperseded
		}
		return nil
	}
}

// lastClaim: the submit this delivery claimed (claim, the record's Submits
// after its claim) is the job's last, and the record is at the stream's
// steps. A speech stream cannot be resumed, and two would write the same
// object: only the delivery of the last claim records and reads its
// stream.
func lastClaim(claim int) fence {
	return func(rec *state.Record, attempt int) error {
		if err := live(rec, attempt); err != nil {
			return err
		}
		if rec.Submits != claim || rec.Status != state.StatusSubmitting && rec.Status != state.StatusCollecting {
			return errSuperseded
		}
		return nil
	}
}

// latest: the job is not finished and no later delivery holds it;
// otherwise the write is left out quietly (a note, not a step).
func latest(rec *state.Record, attempt int) error {
	if rec.Status.Terminal() || rec.Attempts != attempt {
		return state.Unchanged
	}
	return nil
}

// ending guards the terminal write to status: a finished record keeps its
// end, and a failure or cancel is the latest delivery's to decide (a
// success is the job's whoever sees it; attempt 0 is a delivery that never
// counted, such as a stray's).
func ending(status state.Status) fence {
	return func(rec *state.Record, attempt int) error {
		switch {
		case rec.Status.Terminal():
			return state.Unchanged
		case status != state.StatusSucceeded && attempt != 0 && rec.Attempts != attempt:
			return errSuperseded
		}
		return nil
	}
}

// finished: the job has ended (notes about its terminal event).
func finished(rec *state.Record, _ int) error {
	if !rec.Status.Terminal() {
		return state.Unchanged
	}
	return nil
}

// beforeCollecting: the job is neither finished nor shown collecting.
func beforeCollecting(rec *state.Record, _ int) error {
	if rec.Status.Terminal() || rec.Status == state.StatusCollecting {
		return state.Unchanged
	}
	return nil
}

// admitted lets the delivery's change decide alone: begin's verdict
// (decide) is that change's fence.
func admitted(*state.Record, int) error { return nil }

// view is what a write starts from: the record as a delivery holds it and
// what the delivery saw but has not recorded yet.
type view struct {
	id      string
	rec     *state.Record // nil: read the record first
	fresh   bool          // rec nil: the record most likely does not exist yet
	attempt int
	// pending and unrecorded ride on the write (see job).
	pending    []state.Artifact
	unrecorded func(*state.Record)
	// unwritten: the write creates the record (see firstWriteCreates).
	unwritten bool
}

// view is what j's next write starts from.
func (j *job) view() view {
	return view{id: j.id, rec: j.rec, attempt: j.attempt, pending: j.pending, unrecorded: j.unrecorded, unwritten: j.unwritten}
}

// write records change in j's record if fence f lets it, and keeps the
// written record in j.rec. With to set, the write moves the job to that
// step, after change, and its error says so. A write JetStream refuses for
// lack of space waits for space (awaitSpace) while ctx lasts and the
// worker runs; see writeRetried for what a paid call returned.
func (r *Runner) write(ctx context.Context, j *job, f fence, to state.Status, change func(*state.Record) error) error {
	for attempt := 0; ; attempt++ {
		err := r.writeOnce(ctx, j, f, to, change)
		if !natsconn.NoSpace(err) {
			if attempt > 0 && err == nil {
				r.checkpoints.OK()
			}
			return err
		}
		r.checkpoints.Fail(err)
		if !r.awaitSpace(ctx, j, err, attempt) {
			return err
		}
	}
}

// writeOnce is one attempt of write. A note that may be left out (the
// terminal event stored) does not wait for space.
func (r *Runner) writeOnce(ctx context.Context, j *job, f fence, to state.Status, change func(*state.Record) error) error {
	rec, err := r.put(ctx, j.view(), f, to, change)
	if err != nil {
		return err
	}
	j.pending, j.unrecorded, j.unwritten = nil, nil, false
	j.rec = rec
	return nil
}

// spaceRetry spaces the attempts of a write JetStream refuses for lack of
// space: each is also a probe of whether space returned.
var spaceRetry = backoff.Exponential{Min: 500 * time.Millisecond, Max: 10 * time.Second}

// LogWaitingForSpace is logged once by a job whose record or terminal
// event JetStream refuses to store for lack of space.
const LogWaitingForSpace = "JetStream has no space for the job's record or event: holding the job until it has"

// awaitSpace waits before the next attempt of j's write or publish that
// JetStream refused for lack of space (err), and reports whether to make
// it: not once ctx ends or the worker stops, when the job is handed back
// with its record where it was. The job says once that it waits; the
// worker's loops and its space watch say it for the worker.
func (r *Runner) awaitSpace(ctx context.Context, j *job, err error, attempt int) bool {
	if attempt == 0 {
		j.log.Warn().Err(err).Msg(LogWaitingForSpace)
	}
	r.pause(ctx, j, nil, spaceRetry.Delay(attempt))
	return ctx.Err() == nil && !j.stopping()
}

// checkpointRetry spaces the retries of writeRetried for up to
// checkpointRetryFor.
var checkpointRetry = backoff.Exponential{Min: 100 * time.Millisecond, Max: 5 * time.Second}

const checkpointRetryFor = time.Minute

// writeRetried is write retried for up to a minute: it records what a paid
// call returned, which must not be lost to a passing NATS hiccup or a
// leader election. A write its fence refuses is not retried. The job logs
// its first failure; the worker's "state writes" loop says once that it
// waits for JetStream. A write refused for lack of space is retried until
// space returns, past ctx's deadline and a stop: given up, it would leave
// the record where a redelivery submits, and pays, again.
func (r *Runner) writeRetried(ctx context.Context, j *job, f fence, to state.Status, change func(*state.Record) error) error {
	logged := false
	for {
		err := r.writeForAMinute(ctx, j, f, to, change, &logged)
		if !natsconn.NoSpace(err) {
			return err
		}
		ctx = context.WithoutCancel(ctx)
	}
}

// writeForAMinute is a minute of writeRetried's attempts.
func (r *Runner) writeForAMinute(ctx context.Context, j *job, f fence, to state.Status, change func(*state.Record) error, logged *bool) error {
	ctx, cancel := context.WithTimeout(ctx, checkpointRetryFor)
	defer cancel()
	_, err := r.retry(ctx, backoff.Retry{Spacing: checkpointRetry, Jitter: backoff.JitterNone},
		func(ctx context.Context, attempt int) (bool, error) {
			err := r.writeOnce(ctx, j, f, to, change)
			if err == nil || errors.Is(err, errAlreadyFinished) || errors.Is(err, errSuperseded) {
				r.checkpoints.OK()
				return true, err
			}
			r.checkpoints.Fail(err)
			if !*logged {
				*logged = true
				msg := "checkpoint failed; retrying"
				if natsconn.NoSpace(err) {
					msg = LogWaitingForSpace
				}
				j.log.Warn().Err(err).Msg(msg)
			}
			return false, err
		})
	return err
}

// put is the one write of a job's record, with compare-and-set, starting
// from v.rec when there is one (see state.Store.UpdateFrom): f guards it,
// over what v holds unrecorded; then change, then the step to.
// The write that creates the record fails when one exists (errNotFresh);
// every write follows keepLastError.
func (r *Runner) put(ctx context.Context, v view, f fence, to state.Status, change func(*state.Record) error) (*state.Record, error) {
	apply := func(rec *state.Record) error {
		before, last := rec.Status, rec.LastError
		if v.unwritten && rec.Stored() {
			return errNotFresh
		}
		if v.unrecorded != nil {
			v.unrecorded(rec)
		}
		for _, a := range v.pending {
			rec.Artifacts = appendArtifact(rec.Artifacts, a)
		}
		if err := f(rec, v.attempt); err != nil {
			return err
		}
		if err := change(rec); err != nil {
			return err
		}
		if to != "" {
			rec.Status = to
		}
		keepLastError(rec, before, last)
		return nil
	}
	var rec *state.Record
	var err error
	switch {
	case v.rec != nil:
		rec, err = r.cfg.State.UpdateFrom(ctx, v.rec, apply)
	case v.fresh:
		rec, err = r.cfg.State.UpdateNew(ctx, v.id, apply)
	default:
		rec, err = r.cfg.State.Update(ctx, v.id, apply)
	}
	if err != nil && to != "" {
		return nil, fmt.Errorf("checkpoint %s: %w", to, err)
	}
	return rec, err
}

// set is a change that cannot fail.
func set(fn func(*state.Record)) func(*state.Record) error {
	return func(rec *state.Record) error { fn(rec); return nil }
}

// claimSubmit claims j's paid submit: it moves the record to "submitting",
// counting the submit and applying fn, only while the record is unmoved
// since this delivery read it. A record already at "submitting" means the
// last worker stopped inside the submit window: the submit is sent again,
// and logged so.
func (r *Runner) claimSubmit(ctx context.Context, j *job, fn func(*state.Record)) error {
	status := j.rec.Status
	if status == state.StatusSubmitting {
		j.log.Warn().Int("submits", j.rec.Submits).Msg(LogSubmittingAgain)
	}
	r.enterStep(j, state.StatusSubmitting) // from here a hand-back may pay twice
	return r.write(ctx, j, unmoved(status), state.StatusSubmitting, set(func(rec *state.Record) {
		rec.Submits++
		if j.reservation != nil {
			rec.Reservation = j.reservation
		}
		fn(rec)
	}))
}
