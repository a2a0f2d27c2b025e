package runner

import (
	"context"
	"errors"

	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/state"
)

// maxLastError bounds the message kept in a record's last error.
const maxLastError = 512

// stepError is the last error of j's step as a retry of it records it: the
// step the retry repeats (rt.step, else the record's status), its code and
// the error, scrubbed. Since carries over from a record that failed the
// same step with the same code already.
func (r *Runner) stepError(j *job, rt *retry) *state.StepError {
	now := r.cfg.Now().UTC()
	e := &state.StepError{Step: rt.step, Code: rt.code, Message: redact.Text(rt.err.Error()), Since: now, At: now}
	if e.Step == "" && j.rec != nil {
		e.Step = j.rec.Status
	}
	if len(e.Message) > maxLastError {
		e.Message = e.Message[:maxLastError-3] + "..."
	}
	if last := j.rec.LastError; last != nil && last.Step == e.Step && last.Code == e.Code {
		e.Since = last.Since
	}
	return e
}

// noteRetry records why j's step is retried (Record.LastError), so that a
// job that stays at its step shows why. It writes only when the note
// changes: a job failing the same way again and again costs one write, not
// one per retry. A job whose record is not written yet (see
// firstWriteCreates), or that another delivery took over, is left alone;
// a failed write is only logged, the retry goes on.
func (r *Runner) noteRetry(ctx context.Context, j *job, rt *retry) {
	if j.rec == nil || j.unwritten || errors.Is(rt.err, errNotFresh) || errors.Is(rt.err, errSuperseded) {
		return
	}
	note := r.stepError(j, rt)
	if note.Same(j.rec.LastError) {
		return
	}
	err := r.writeOnce(ctx, j, latest, "", func(rec *state.Record) error {
		if note.Same(rec.LastError) {
			return state.Unchanged
		}
		rec.LastError = note
		return nil
	})
	if err != nil {
		j.log.Debug().Err(err).Msg("cannot record the job's last error")
	}
}

// keepLastError is the rule every write of a job's record follows: a write
// that moves the job to another step than its last error's, without
// setting a last error of its own, clears it (the step succeeded).
func keepLastError(rec *state.Record, before state.Status, last *state.StepError) {
	if last != nil && rec.LastError == last && rec.Status != before && rec.Status != last.Step {
		rec.LastError = nil
	}
}
