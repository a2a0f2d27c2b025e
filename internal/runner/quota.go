package runner

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
)

// acquireQuota waits, before j's paid submit, until the fleet's quota of
// j's resource has room for its task (see internal/quota). A waiting job
// is not failed: its message stays held, the consumer's heartbeats keep
// it, and its delivery count does not move. A stop hands the job back; a
// cancel ends it cancelled, never submitted.
func (r *Runner) acquireQuota(ctx context.Context, j *job) error {
	if r.cfg.Quota == nil || j.lease != nil {
		return nil
	}
	j.claimed = true
	if r.cfg.Quota.Waiting(j.kind) {
		// The wait may be long: let other jobs start meanwhile.
		j.d.Started()
		j.log.Debug().Msg("waiting for the fleet's quota")
	}
	// The quota bounds this wait, not the watchdog.
	j.watch.Step(StepQuota, 0)
	defer r.enterStep(j, state.StatusReceived)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case <-j.d.Stopping():
		case <-j.cancel:
		case <-wctx.Done():
		}
		stop()
	}()
	lease, err := r.cfg.Quota.Acquire(wctx, j.kind, j.id, j.d.Msg.Reply())
	switch {
	case err == nil:
		j.lease = lease
		return nil
	case j.stopping() || ctx.Err() != nil:
		return errStopping
	case j.cancelled():
		return errCancelled
	}
	return transient(fmt.Errorf("wait for the fleet's quota: %w", err))
}

// takeQuota takes over the lease of j's task, already upstream (a
// redelivered job resuming it), whatever the quota: the count follows the
// tasks upstream.
func (r *Runner) takeQuota(j *job) {
	if r.cfg.Quota == nil || j.lease != nil {
		return
	}
	if s := j.rec.Status; s == state.StatusSubmitted || s == state.StatusRunning {
		j.claimed = true
		j.lease = r.cfg.Quota.Take(j.kind, j.id, j.d.Msg.Reply())
	}
}

// releaseQuota gives j's lease back: its task is terminal upstream.
func (r *Runner) releaseQuota(j *job) {
	j.lease.Release()
	j.lease = nil
}

// settleQuota ends j's hold on the quota as its message settles with out:
// a job handed back or retried while its task runs upstream leaves its
// lease counting until its next delivery, after the retry's delay, takes
// it over; any other gives it back. A job
// that never asked for a lease drops the place the consumer reserved for
// it.
func (r *Runner) settleQuota(j *job, out consumer.Outcome) {
	if r.cfg.Quota == nil {
		return
	}
	if !j.claimed {
		j.claimed = true
		r.cfg.Quota.DropReservation(j.kind)
	}
	if j.lease == nil {
		return
	}
	upstream := j.rec != nil && (j.rec.Status == state.StatusSubmitted || j.rec.Status == state.StatusRunning)
	switch {
	case upstream && out.Action == consumer.Release:
		j.lease.HandBack(0)
	case upstream && out.Action == consumer.Retry:
		j.lease.HandBack(out.Delay)
	case j.unseenTask:
		// An ambiguous submit may have made a task that nobody will ever
		// poll: its lease keeps counting as handed back until it lapses
		// (three lease lives), as a dead worker's does.
		j.lease.HandBack(0)
	default:
		j.lease.Release()
	}
	j.lease = nil
}
