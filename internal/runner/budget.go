package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/tenants"
)

// budgetRecheck caps how long a job waiting for its tenant's budget waits
// before it looks again: an operator may raise the budget, or another
// job's settlement free some, long before the next period starts.
const budgetRecheck = 5 * time.Minute

// admit takes what j needs before its paid submit: a reservation of its
// estimated cost against its tenant's budget, then a lease of the fleet's
// quota (a job waiting for budget holds no lease).
func (r *Runner) admit(ctx context.Context, j *job) error {
	if err := r.reserveBudget(ctx, j); err != nil {
		return err
	}
	return r.acquireQuota(ctx, j)
}

// reserveBudget reserves j's estimated cost in the ledger
// (docs/tenants.md#budgets) unless the price table does not cover j or
// its record holds a reservation already. Without a price table it does
// nothing, and no NATS operation. The reservation is recorded by the
// submit's claim (claimSubmit).
func (r *Runner) reserveBudget(ctx context.Context, j *job) error {
	l := r.cfg.Tenants
	if l == nil || j.reservation != nil {
		return nil
	}
	if res := j.rec.Reservation; res != nil {
		j.reservation = res
		return nil
	}
	estimate, covered := l.View().Prices().Estimate(j.spec)
	if !covered {
		return nil
	}
	// A pipeline's step draws on the reservation its pipeline took for
	// all its steps (pipeline.go); another job bearing the label does not.
	from := j.spec.Labels[contract.LabelPipeline]
	if !strings.HasPrefix(j.id, from+jobspec.StepSeparator) {
		from = ""
	}
	key, err := l.ReserveFrom(ctx, j.spec.EffectiveTenant(), j.id, j.kind, estimate, from)
	if over, ok := errors.AsType[*tenants.OverBudget](err); ok {
		return r.overBudget(ctx, j, over)
	}
	if err != nil {
		return transient(fmt.Errorf("reserve the job's budget: %w", err))
	}
	j.reservation = &state.Reservation{Key: key, Credits: estimate}
	return nil
}

// overBudget ends the delivery of a job its tenant's budget has no room
// for: failed budget_exhausted with on_budget fail; else it waits, its
// record at its step with the reason in its last error, and is delivered
// again at the next period's start or after budgetRecheck, whichever
// comes first. BudgetWaits counts the wait so that it does not count
// against MaxDeliver.
func (r *Runner) overBudget(ctx context.Context, j *job, over *tenants.OverBudget) error {
	if over.OnBudget == tenants.OnBudgetFail {
		return fail(CodeBudgetExhausted, state.StageSubmit, false, "%v; its on_budget is fail", over)
	}
	rt := &retry{err: fmt.Errorf("waiting for budget: %v", over), code: CodeBudgetExhausted}
	rt.delay = min(max(over.Next.Sub(r.cfg.Now()), time.Second), budgetRecheck)
	note := r.stepError(j, rt)
	if cerr := r.write(ctx, j, live, "", set(func(rec *state.Record) {
		rec.BudgetWaits++
		rec.LastError = note
	})); cerr != nil {
		j.log.Warn().Err(cerr).Msg("cannot record the wait for budget")
	}
	j.log.Info().Str("tenant", over.Tenant).Dur("retry_in", rt.delay).Msg("waiting for the tenant's budget; nothing was submitted")
	return rt
}

// jobCost is j's actual cost as its finished record rec says, nil when
// the price table does not cover j (docs/tenants.md#actual-cost). A job
// that took over another's upstream run (tookOver) cost nothing: the
// other job's event reports that run's cost, once.
func (r *Runner) jobCost(j *job, rec *state.Record) *float64 {
	if r.cfg.Tenants == nil || j.spec == nil {
		return nil
	}
	run := tenants.Run{
		Submitted: rec.Submits > 0 || rec.SubmittedAt != nil,
		Succeeded: rec.Status == state.StatusSucceeded,
	}
	if rec.SubmittedAt != nil && rec.FinishedAt != nil {
		run.Started, run.Ended = *rec.SubmittedAt, *rec.FinishedAt
	}
	cost, covered := r.cfg.Tenants.View().Prices().Cost(j.spec, rec.Usage, run)
	if !covered {
		return nil
	}
	if tookOver(rec) {
		cost = 0
	}
	return &cost
}

// tookOver reports whether rec's job runs an upstream task or job that
// another job submitted and paid for (the retry of a job that failed
// artifact_store_refused: its record is prepared with the original's
// upstream ids): it claimed no submit of its own, yet names one.
func tookOver(rec *state.Record) bool {
	return rec.Submits == 0 && (rec.Upstream.TaskID != "" || rec.Upstream.JobID != "")
}

// settleBudget turns j's reservation into its cost in the ledger. A
// reservation settled already (a redelivered finished job) changes
// nothing, so the cost is counted once. A reservation the record does not
// name (taken by this delivery or an earlier one that ended before its
// submit's claim) is looked up in the view, which costs no NATS operation
// when there is none.
func (r *Runner) settleBudget(ctx context.Context, j *job) error {
	if r.cfg.Tenants == nil {
		return nil
	}
	rec, key := j.rec, ""
	switch {
	case rec.Reservation != nil:
		key = rec.Reservation.Key
	case j.reservation != nil:
		key = j.reservation.Key
	}
	var cost float64
	if rec.Cost != nil {
		cost = *rec.Cost
	}
	tenant := cmp.Or(rec.Tenant, j.spec.EffectiveTenant())
	if err := r.cfg.Tenants.Settle(ctx, tenant, j.id, key, cost); err != nil {
		return fmt.Errorf("settle the job's budget: %w", err)
	}
	return nil
}

// markScheduler writes the scheduler marker when j asks for more than the
// defaults and fair scheduling is off; a failure is only logged (the next
// such job tries again).
func (r *Runner) markScheduler(ctx context.Context, j *job) {
	if r.cfg.Tenants == nil {
		return
	}
	if err := r.cfg.Tenants.Mark(ctx, j.spec); err != nil {
		j.log.Warn().Err(err).Msg("cannot write the scheduler marker")
	}
}
