package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/state"
)

// errSuperseded stops a delivery whose job another delivery has taken over
// since this one started: it may not submit (claimSubmit) nor end the job
// failed or cancelled (Runner.terminal); it is redelivered later and then
// resumes from the record.
var errSuperseded = errors.New("another delivery of the job took it over meanwhile")

// claimSubmit checkpoints "submitting" (counting the submit, then applying
// fn) only if the record is still where this delivery left it: no other
// delivery started meanwhile (Attempts) nor moved the job on (Status).
// Two deliveries can hold one job at once (a worker that runs on after its
// lease lapsed while NATS was out of reach; the same job id published
// twice outside the duplicate window); this lets at most one of them send
// the paid submit. The other fails with errSuperseded and is redelivered
// later, to resume from the record.
//
// A record already at "submitting" means the last worker stopped inside
// the submit window: the submit is sent again, and logged so.
func (r *Runner) claimSubmit(ctx context.Context, j *job, fn func(*state.Record)) error {
	status := j.rec.Status
	if status == state.StatusSubmitting {
		j.log.Warn().Int("submits", j.rec.Submits).Msg(LogSubmittingAgain)
	}
	unmoved := unmovedSince(j, status)
	rec, err := r.update(ctx, j, func(rec *state.Record) error {
		if rec.Status.Terminal() {
			return errAlreadyFinished
		}
		if err := unmoved(rec); err != nil {
			return err
		}
		rec.Submits++
		fn(rec)
		rec.Status = state.StatusSubmitting
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", state.StatusSubmitting, err)
	}
	j.rec = rec
	return nil
}

// recordSubmitted checkpoints "submitted" with what a paid submit returned
// (fn records the upstream id, which idOf reads back), retried like
// retryCheckpoint. Two deliveries inside one submit window (the second
// started while the first was still submitting) each send a submit; the
// first to record its task wins, and the job goes on with that task only.
// The other gets errSuperseded: its task is left unrecorded upstream (the
// record's Submits counts it), and it copies and ends nothing, so the
// artifacts are always those of the task the record and the terminal event
// name. A record that already holds this delivery's id (a retry after a
// lost answer) is left as it is.
func (r *Runner) recordSubmitted(ctx context.Context, j *job, id string, idOf func(*state.Record) string, fn func(*state.Record)) error {
	return r.recordFenced(ctx, j, state.StatusSubmitted, func(rec *state.Record) error {
		switch {
		case idOf(rec) == id:
			return state.Unchanged
		case rec.Status != state.StatusSubmitting:
			return errSuperseded
		}
		return nil
	}, fn)
}

// recordFenced checkpoints status with fn, retried like retryCheckpoint,
// if fence lets it: fence returns errSuperseded for a record another
// delivery moved on, or state.Unchanged for one that holds this write
// already. A finished record is never written (errAlreadyFinished).
func (r *Runner) recordFenced(ctx context.Context, j *job, status state.Status, fence func(*state.Record) error, fn func(*state.Record)) error {
	return r.retryWrite(ctx, j, func(ctx context.Context) error {
		rec, err := r.update(ctx, j, func(rec *state.Record) error {
			if rec.Status.Terminal() {
				return errAlreadyFinished
			}
			if err := fence(rec); err != nil {
				return err
			}
			fn(rec)
			rec.Status = status
			return nil
		})
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", status, err)
		}
		j.rec = rec
		return nil
	})
}

// recordStream checkpoints "collecting" for j's speech stream, applying fn,
// retried like retryCheckpoint, while the submit this delivery claimed
// (claim: the record's Submits after claimSubmit) is the job's last. Two
// deliveries inside one submit window each open a stream; a stream cannot
// be resumed, and both would write the same object, the later one over
// the audio the terminal event describes. Only the delivery of the last
// claim records its stream, reads it and stores its audio; the other gets
// errSuperseded before it reads a byte. (Once a stream is recorded no
// delivery claims again: the record is at "collecting".)
func (r *Runner) recordStream(ctx context.Context, j *job, claim int, fn func(*state.Record)) error {
	return r.recordFenced(ctx, j, state.StatusCollecting, func(rec *state.Record) error {
		if rec.Submits != claim || rec.Status != state.StatusSubmitting && rec.Status != state.StatusCollecting {
			return errSuperseded
		}
		return nil
	}, fn)
}

// unmovedSince is the fence of a write that j's delivery may make only
// while the record is where it found it: no other delivery started since
// (Attempts) nor moved the job on (Status, status as the delivery read it).
func unmovedSince(j *job, status state.Status) func(*state.Record) error {
	return func(rec *state.Record) error {
		if rec.Attempts != j.attempt || rec.Status != status {
			return errSuperseded
		}
		return nil
	}
}
