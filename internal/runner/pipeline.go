package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/tenants"
)

// pipelineRecheck is how often a pipeline reads its steps' records
// without news from its watch: a watch that lost its subscription is
// made up for within this long.
const pipelineRecheck = 5 * time.Second

// holding fences a pipeline's writes: the job is not finished and no
// later delivery took it over. A write it refuses is not followed by the
// publishes it would have announced.
func holding(rec *state.Record, attempt int) error {
	switch {
	case rec.Status.Terminal():
		return errAlreadyFinished
	case rec.Attempts != attempt:
		return errSuperseded
	}
	return nil
}

// runPipeline drives pipeline j (docs/pipelines.md): it publishes each
// step once every step it needs has succeeded, waits on the steps'
// records, applies the failure policy and the pipeline's cancel, and
// returns how the pipeline ends. Every decision is planPipeline's over the
// pipeline's record and its steps' records, and every publish is recorded
// (queued) before it is sent, so a pipeline resumed after a crash
// publishes the same step again, with the same bytes and Nats-Msg-Id,
// rather than another.
func (r *Runner) runPipeline(ctx context.Context, j *job) error {
	if r.cfg.JS == nil {
		return fail(CodeInvalidSpec, state.StageValidate, true, "this worker cannot publish a pipeline's steps")
	}
	// A pipeline waits as long as its steps: let other jobs start.
	j.d.Started()
	p := j.spec.Pipeline
	ids := make([]string, len(p.Steps))
	for i, st := range p.Steps {
		ids[i] = jobspec.StepID(j.id, st.Name)
		// The spec checks this when it names its id; an id taken from
		// the message is only known here.
		if !jobspec.ValidID(ids[i]) {
			return fail(CodeInvalidSpec, state.StageValidate, true,
				"pipeline.steps[%d].name: the step id <pipeline id>--<name> must be at most 128 bytes, got %d", i, len(ids[i]))
		}
	}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	// Watching before the first read: a step that ends after it wakes us.
	changes, err := r.cfg.State.Watch(wctx, ids)
	if err != nil {
		j.log.Warn().Err(err).Msg("cannot watch the pipeline's steps; reading them every few seconds")
	}
	if err := r.startPipeline(ctx, j, ids); err != nil {
		return err
	}
	cancelWake := j.cancel
	var dirty map[string]bool // the steps written since the last read; nil: all
	for first := true; ; first = false {
		if j.stopping() || ctx.Err() != nil {
			return errStopping
		}
		seen, err := r.readSteps(ctx, j.rec.Pipeline.Steps, dirty)
		if err != nil {
			return transient(err)
		}
		if first {
			// Resumed: a step recorded queued may have died with the
			// worker before its publish; the same message again is
			// dropped if it was stored.
			if err := r.resumeSteps(ctx, j, seen); err != nil {
				return err
			}
		}
		cancelled := j.cancelled()
		if cancelled {
			cancelWake = nil // heard: wait for the steps' ends now
		}
		pl := planPipeline(p, j.rec.Pipeline.Steps, seen, cancelled)
		if err := r.recordPlan(ctx, j, pl); err != nil {
			return err
		}
		if err := r.actOnPlan(ctx, j, pl); err != nil {
			return err
		}
		if pl.done {
			return pl.end
		}
		if len(pl.publish) > 0 || len(pl.unreachable) > 0 || len(pl.cancel) > 0 {
			dirty = stepsWritten(changes, false)
			continue // what was just done may decide more at once
		}
		dirty = stepsWritten(changes, r.awaitSteps(ctx, j, changes, cancelWake))
	}
}

// stepsWritten is the steps changes saw written since the last call, nil (all
// of them) without a watch, when it was lost, or when every step is to be
// read again anyway (all).
func stepsWritten(changes *state.Changes, all bool) map[string]bool {
	if changes == nil || all {
		if changes != nil {
			changes.Take()
		}
		return nil
	}
	return changes.Take()
}

// resumeSteps sends again what the record announced and an earlier
// delivery may have died before sending: the publish of each step
// recorded queued that no worker received yet, the failure of each step whose
// input was missing, and each cancel recorded sent. All are idempotent:
// the same message within the duplicate window, failStep's checks, a
// cancel flag set again.
func (r *Runner) resumeSteps(ctx context.Context, j *job, seen []*state.Record) error {
	for i, s := range j.rec.Pipeline.Steps {
		switch {
		case s.Status == state.StepQueued && (seen[i] == nil || seen[i].Status == ""):
			// No status: no worker received it (a record may hold only a
			// cancel asked by the step's id, which the step ends on).
			if err := r.publishStep(ctx, j, i); err != nil {
				return transient(fmt.Errorf("publish step %s again: %w", s.Name, err))
			}
		case s.Status == state.StatusFailed && s.Error != nil && s.Error.Code == CodeInputUnreachable:
			if err := r.failStep(ctx, j, i, s.Error); err != nil {
				return transient(fmt.Errorf("fail step %s again: %w", s.Name, err))
			}
		case s.CancelSent && !s.Ended():
			r.cancelStep(ctx, j, s.JobID)
		}
	}
	return nil
}

// startPipeline writes the pipeline's steps into its record at its first
// run: each waiting, except those a retry takes from the run it retries.
func (r *Runner) startPipeline(ctx context.Context, j *job, ids []string) error {
	if j.rec.Pipeline != nil {
		return nil
	}
	reused, err := r.reusedSteps(ctx, j)
	if err != nil {
		return transient(err)
	}
	steps := make([]state.PipelineStep, len(ids))
	var toRun []*jobspec.Spec // the steps to reserve for
	for i, st := range j.spec.Pipeline.Steps {
		steps[i] = state.PipelineStep{Name: st.Name, JobID: ids[i], Status: state.StepWaiting}
		switch old, ok := reused[st.Name]; {
		case ok:
			steps[i] = state.PipelineStep{Name: st.Name, JobID: old.JobID, Status: state.StatusSucceeded, Reused: true, Artifacts: old.Artifacts}
		case st.Spec.Tenant == "" || st.Spec.Tenant == j.spec.EffectiveTenant():
			toRun = append(toRun, st.Spec) // paid by the pipeline's tenant
		}
	}
	if err := r.reservePipeline(ctx, j, toRun); err != nil {
		return err
	}
	return r.write(ctx, j, holding, state.StatusRunning, func(rec *state.Record) error {
		if rec.Pipeline == nil {
			rec.Pipeline = &state.Pipeline{Steps: steps}
		}
		if rec.Reservation == nil {
			rec.Reservation = j.reservation
		}
		return nil
	})
}

// reservePipeline reserves the estimates of every step the pipeline is to
// run, before the first is published, so that a pipeline the tenant's
// budget cannot cover runs no step rather than stopping half done. Each
// step then reserves its own estimate out of it (tenants.ReserveFrom)
// and settles its own cost; the pipeline's end releases what is left.
func (r *Runner) reservePipeline(ctx context.Context, j *job, specs []*jobspec.Spec) error {
	l := r.cfg.Tenants
	if l == nil || j.rec.Reservation != nil {
		return nil
	}
	var total float64
	var covered bool
	for _, s := range specs {
		e, ok := l.View().Prices().Estimate(s)
		total, covered = total+e, covered || ok
	}
	if !covered {
		return nil
	}
	key, err := l.Reserve(ctx, j.spec.EffectiveTenant(), j.id, j.kind, total)
	if over, ok := errors.AsType[*tenants.OverBudget](err); ok {
		return r.overBudget(ctx, j, over)
	}
	if err != nil {
		return transient(fmt.Errorf("reserve the pipeline's budget: %w", err))
	}
	j.reservation = &state.Reservation{Key: key, Credits: total}
	return nil
}

// reusedSteps returns the succeeded steps of the pipeline j retries (its
// retry_of label), by name, and of that pipeline's earlier retries, the
// latest run's first: a retry reruns only what succeeded in none of them
// (P-r2 takes what P-r1 paid for).
func (r *Runner) reusedSteps(ctx context.Context, j *job) (map[string]state.PipelineStep, error) {
	orig := j.spec.Labels[contract.LabelRetryOf]
	if orig == "" {
		return nil, nil
	}
	runs := []string{orig}
	if n, err := strconv.Atoi(strings.TrimPrefix(j.id, orig+"-r")); err == nil {
		for k := 1; k < n; k++ {
			runs = append(runs, fmt.Sprintf("%s-r%d", orig, k))
		}
	}
	out := map[string]state.PipelineStep{}
	for _, id := range runs {
		rec, _, err := r.cfg.State.Get(ctx, id)
		switch {
		case errors.Is(err, state.ErrNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("read the retried pipeline %s: %w", id, err)
		case rec.Pipeline == nil:
			continue
		}
		for _, s := range rec.Pipeline.Steps {
			if s.Status == state.StatusSucceeded {
				out[s.Name] = s
			}
		}
	}
	return out, nil
}

// readSteps reads the record of every published step that has not ended,
// of those in dirty when it is not nil (the others are left nil: nothing
// new of them).
func (r *Runner) readSteps(ctx context.Context, steps []state.PipelineStep, dirty map[string]bool) ([]*state.Record, error) {
	seen := make([]*state.Record, len(steps))
	for i, s := range steps {
		if s.Ended() || s.Status == state.StepWaiting || dirty != nil && !dirty[s.JobID] {
			continue
		}
		rec, _, err := r.cfg.State.Get(ctx, s.JobID)
		switch {
		case errors.Is(err, state.ErrNotFound):
		case err != nil:
			return nil, err
		default:
			seen[i] = rec
		}
	}
	return seen, nil
}

// recordPlan writes the plan's steps into the pipeline's record when they
// changed, before anything they announce is sent.
func (r *Runner) recordPlan(ctx context.Context, j *job, pl pipelinePlan) error {
	if slices.EqualFunc(pl.steps, j.rec.Pipeline.Steps, sameStep) {
		return nil
	}
	err := r.write(ctx, j, holding, "", func(rec *state.Record) error {
		rec.Pipeline = &state.Pipeline{Steps: pl.steps}
		return nil
	})
	if err != nil {
		return transient(fmt.Errorf("record the pipeline's steps: %w", err))
	}
	return nil
}

// sameStep reports whether a and b show the same step state.
func sameStep(a, b state.PipelineStep) bool {
	return a.Status == b.Status && a.CancelSent == b.CancelSent && len(a.Artifacts) == len(b.Artifacts) && (a.Error == nil) == (b.Error == nil)
}

// actOnPlan sends what the recorded plan announced: the step publishes,
// the unreachable steps' failures and the cancels.
func (r *Runner) actOnPlan(ctx context.Context, j *job, pl pipelinePlan) error {
	for _, i := range pl.publish {
		if err := r.publishStep(ctx, j, i); err != nil {
			return transient(fmt.Errorf("publish step %s: %w", j.spec.Pipeline.Steps[i].Name, err))
		}
	}
	for _, i := range slices.Sorted(maps.Keys(pl.unreachable)) {
		if err := r.failStep(ctx, j, i, pl.steps[i].Error); err != nil {
			return transient(fmt.Errorf("fail step %s: %w", j.spec.Pipeline.Steps[i].Name, err))
		}
	}
	for _, i := range pl.cancel {
		r.cancelStep(ctx, j, pl.steps[i].JobID)
	}
	return nil
}

// publishStep publishes step i, recorded queued, as an ordinary job. Its
// bytes depend only on the spec and the records of the steps it needs,
// so a publish repeated after a crash is the same message, which the
// jobs stream drops as a duplicate of its Nats-Msg-Id within its window.
func (r *Runner) publishStep(ctx context.Context, j *job, i int) error {
	st := j.spec.Pipeline.Steps[i]
	id := jobspec.StepID(j.id, st.Name)
	data, err := stepSpec(j.spec, id, st, j.rec.Pipeline.Steps)
	if err != nil {
		return err
	}
	m := nats.NewMsg(stepSubject(j, st))
	m.Data = data
	m.Header.Set(contract.HeaderMsgID, id)
	pctx, cancel := context.WithTimeout(ctx, pipelinePublishTimeout)
	defer cancel()
	if _, err := r.cfg.JS.PublishMsg(pctx, m); err != nil {
		return err
	}
	j.log.Info().Str("step", st.Name).Str("step_job_id", id).Msg("pipeline step published")
	return nil
}

// stepSubject is where step st of pipeline j is published: its tenant's
// subject when the pipeline arrived on that tenant's subject (so that a
// bound tenant's steps are accepted), else its kind's. A step naming
// another tenant than the one its pipeline arrived for gets no more
// right to act for it than the pipeline had.
func stepSubject(j *job, st jobspec.Step) string {
	kind := string(st.Spec.Kind)
	tenant := cmp.Or(st.Spec.Tenant, j.spec.Tenant)
	if j.d == nil || j.d.Msg == nil {
		return contract.JobSubject(kind)
	}
	if arrivedFor := contract.ArrivedFor(j.d.Msg.Subject(), j.d.Msg.Headers()); arrivedFor != "" && tenant == arrivedFor {
		return contract.TenantSubject(kind, tenant)
	}
	return contract.JobSubject(kind)
}

// pipelinePublishTimeout bounds one step's publish.
const pipelinePublishTimeout = 10 * time.Second

// stepSpec is the spec step st of pipeline spec p is published with: the
// step's own, with id, the pipeline's tenant, priority and labels unless
// it sets its own (plus the pipeline label), and each artifact reference
// replaced by the artifact's s3:// URL from the steps' records.
func stepSpec(p *jobspec.Spec, id string, st jobspec.Step, steps []state.PipelineStep) ([]byte, error) {
	raw, err := json.Marshal(st.Spec)
	if err != nil {
		return nil, err
	}
	var s jobspec.Spec
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	s.ID = id
	if s.Tenant == "" {
		s.Tenant = p.Tenant
	}
	if s.Priority == 0 {
		s.Priority = p.Priority
	}
	if s.Labels == nil {
		s.Labels = maps.Clone(p.Labels)
		delete(s.Labels, contract.LabelRetryOf)
	}
	// The label is how the step finds its pipeline's reservation: always
	// this pipeline's job id (its spec may have none), never a label the
	// step wrote (validation leaves it room).
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[contract.LabelPipeline] = strings.TrimSuffix(id, jobspec.StepSeparator+st.Name)
	// The references were decoded into st.Spec, not into its JSON copy.
	src, dst := stepInputs(st.Spec), stepInputs(&s)
	for k, in := range src {
		if in.Ref == nil {
			continue
		}
		at := slices.IndexFunc(p.Pipeline.Steps, func(o jobspec.Step) bool { return o.Name == in.Ref.Step })
		a, ok := findArtifact(steps[at].Artifacts, in.Ref.Artifact)
		if !ok {
			return nil, fmt.Errorf("step %q produced no artifact %q", in.Ref.Step, in.Ref.Artifact)
		}
		dst[k].From, dst[k].Ref = a.URL, nil
	}
	return json.Marshal(&s)
}

// failStep ends step i, whose input is missing, failed input_unreachable
// without running it: its own record and failed event, nothing paid.
func (r *Runner) failStep(ctx context.Context, j *job, i int, e *state.Error) error {
	st := j.spec.Pipeline.Steps[i]
	id := jobspec.StepID(j.id, st.Name)
	now := r.cfg.Now().UTC()
	rec, err := r.cfg.State.Update(ctx, id, func(rec *state.Record) error {
		if rec.Status != "" {
			return state.Unchanged // it ran after all, or already failed so
		}
		rec.Kind, rec.Status, rec.Error, rec.FinishedAt = string(st.Spec.Kind), state.StatusFailed, e, &now
		rec.Tenant, rec.Priority, rec.Labels = j.rec.Tenant, j.rec.Priority, j.rec.Labels
		ev, err := json.Marshal(events.FromRecord(rec, state.StatusFailed, now))
		rec.TerminalEvent = ev
		return err
	})
	if err != nil {
		return err
	}
	if rec.Status != state.StatusFailed || rec.Attempts != 0 || rec.TerminalEventStored || len(rec.TerminalEvent) == 0 {
		return nil // a run of the step wrote it (Attempts), or the event is out
	}
	if err := r.cfg.Events.PublishRaw(ctx, rec.Kind, string(rec.Status), contract.EventID(id, string(rec.Status)), rec.TerminalEvent); err != nil {
		return err
	}
	_, _ = r.cfg.State.Update(ctx, id, func(rec *state.Record) error {
		rec.TerminalEventStored = true
		return nil
	})
	return nil
}

// cancelStep asks for the cancel of step job id the ordinary way: the
// cancel flag in its record (a step not received yet is cancelled when it
// is), and a notice to the worker holding it, which cancels it upstream.
func (r *Runner) cancelStep(ctx context.Context, j *job, id string) {
	if _, err := r.cfg.State.RequestCancel(ctx, id); err != nil {
		j.log.Warn().Err(err).Str("step_job_id", id).Msg("cannot record a step's cancel; its worker hears of it by the notice only")
	}
	body, _ := json.Marshal(contract.CancelRequest{JobID: id})
	if err := r.cfg.JS.Conn().Publish(contract.CancelSubject, body); err != nil {
		j.log.Warn().Err(err).Str("step_job_id", id).Msg("cannot send a step's cancel notice")
	}
}

// awaitSteps waits for news of the steps: a write of one of their
// records, the pipeline's cancel, the worker's stop, or pipelineRecheck,
// after which it reports that every step is to be read again.
func (r *Runner) awaitSteps(ctx context.Context, j *job, changes *state.Changes, cancel <-chan struct{}) (recheck bool) {
	t := time.NewTimer(pipelineRecheck)
	defer t.Stop()
	var wake <-chan struct{}
	if changes != nil {
		wake = changes.C
	}
	select {
	case <-wake:
	case <-cancel:
	case <-j.d.Stopping():
	case <-ctx.Done():
	case <-t.C:
		return true
	}
	return false
}
