package runner

import (
	"cmp"
	"context"
	"time"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/watchdog"
)

// DefaultStepMinDeadline is Config.StepMinDeadline's default.
const DefaultStepMinDeadline = time.Minute

// StepQuota is the watchdog's step of a job waiting for the fleet's
// quota: a wait without a bound of its own (the quota decides), never
// judged stuck.
const StepQuota = "waiting_quota"

// watch tracks d with the watchdog (Config.Watchdog) from its first
// step, received, until it is settled, and returns the context the job
// runs in: the watchdog cancels it, and hands the delivery back, once the
// job is past its step's hard bound.
func (r *Runner) watch(ctx context.Context, d *consumer.Delivery) (context.Context, *watchdog.Job) {
	if r.cfg.Watchdog == nil {
		return ctx, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	id := d.Msg.Headers().Get("Nats-Msg-Id")
	settled := func() bool {
		if d.Done() {
			cancel() // the job is over here: free its context
			return true
		}
		return false
	}
	handBack := func() {
		cancel()
		d.Settle(context.WithoutCancel(ctx), consumer.Outcome{Action: consumer.Release})
	}
	return ctx, r.cfg.Watchdog.Track(id, d.Kind, string(state.StatusReceived), r.workerDeadline(d), settled, handBack)
}

// stepDeadline is the deadline of j's step status, which the watchdog
// multiplies into its bounds: the job's upstream timeout while it is
// upstream, workerDeadline before.
func (r *Runner) stepDeadline(j *job, status state.Status) time.Duration {
	if status == state.StatusSubmitting {
		// The claim and the paid submit share one SubmitTimeout, the
		// write of its answer has another: a hand-back inside them would
		// let the redelivery, finding "submitting", pay again.
		return max(r.workerDeadline(j.d), 2*r.cfg.SubmitTimeout)
	}
	if !status.Active() {
		return r.workerDeadline(j.d)
	}
	if j.kind == "video" || j.kind == "speech" {
		return r.cfg.TaskTimeout
	}
	return r.cfg.ComputeTimeout
}

// workerDeadline is the deadline of a step before the paid submit:
// SLUICE_ACK_WAIT, at least StepMinDeadline.
func (r *Runner) workerDeadline(d *consumer.Delivery) time.Duration {
	return max(d.AckWait(), cmp.Or(r.cfg.StepMinDeadline, DefaultStepMinDeadline))
}

// enterStep tells the watchdog that j is now at status.
func (r *Runner) enterStep(j *job, status state.Status) {
	j.watch.Step(string(status), r.stepDeadline(j, status))
}

// resumeStep tells the watchdog the step j's record is at as its delivery
// goes on: a redelivered job resumes at submitted or running, whose
// deadline is the upstream timeout, not SLUICE_ACK_WAIT.
func (r *Runner) resumeStep(j *job) {
	if j.rec != nil && j.rec.Status != "" {
		r.enterStep(j, j.rec.Status)
	}
}

// MarkStuck records in jobID's record that the watchdog found it stuck at
// step since since (watchdog.Config.Mark). A job without a record yet, or
// that moved on or ended, is left as it is.
func MarkStuck(st *state.Store, worker string, now func() time.Time) func(context.Context, string, string, time.Time) {
	return func(ctx context.Context, id, step string, since time.Time) {
		_, _ = st.Update(ctx, id, func(r *state.Record) error {
			if r.Status == "" || string(r.Status) != step || r.Status.Terminal() {
				return state.Unchanged
			}
			r.Stuck = &state.StuckMark{Step: r.Status, Since: since.UTC(), At: now().UTC(), Worker: worker}
			return nil
		})
	}
}
