package tenants

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/kvcas"
)

// Ledger takes and settles budget reservations in the ledger's day keys
// and writes the scheduler marker. It reads through its View, so a job
// whose tenant has nothing to reserve costs no NATS operation.
type Ledger struct {
	kv     jetstream.KeyValue
	view   *View
	days   *kvcas.Doc[Day]
	now    func() time.Time
	marked atomic.Bool
}

// NewLedger returns a Ledger over kv (the SLUICE_TENANTS bucket) reading
// through view. conn, when set, is kv's connection (reads after a
// conflict go to the stream leader).
func NewLedger(kv jetstream.KeyValue, conn *nats.Conn, view *View, now func() time.Time) *Ledger {
	if now == nil {
		now = time.Now
	}
	return &Ledger{kv: kv, view: view, now: now, days: kvcas.New(kvcas.Doc[Day]{
		KV: kv, Conn: conn, Name: "ledger day",
		WriteID: func(d *Day) *string { return &d.WriteID },
	})}
}

// View is the view the ledger reads through.
func (l *Ledger) View() *View { return l.view }

// OverBudget is Reserve's refusal: the job's estimate does not fit in
// its tenant's budget for the current period.
type OverBudget struct {
	Tenant   string
	Spent    float64 // settled this period
	Reserved float64 // held by jobs still running this period
	Estimate float64
	Budget   Budget
	OnBudget OnBudget
	// Next is when the next period starts.
	Next time.Time
}

func (e *OverBudget) Error() string {
	held := "spent " + Credits(e.Spent)
	if e.Reserved > 0 {
		held += " and reserved " + Credits(e.Reserved)
	}
	return fmt.Sprintf("tenant %s %s of %s credits %s (this job needs %s)",
		e.Tenant, held, Credits(e.Budget.Credits), e.Budget.Per.This(), Credits(e.Estimate))
}

// Credits formats an amount of credits.
func Credits(c float64) string { return fmt.Sprintf("%.4g", c) }

// Reserve opens a reservation of estimate credits for jobID of tenant on
// today's ledger key and returns that key. It is idempotent per job id: a
// job that holds one already (on any day) gets it back unchanged. It
// returns an *OverBudget when the tenant has a budget and its period's
// spent and reserved credits plus estimate would exceed it; the check
// and the reservation are one compare-and-set of today's key, the other
// days of the period counted as the view holds them.
func (l *Ledger) Reserve(ctx context.Context, tenant, jobID, kind string, estimate float64) (string, error) {
	return l.ReserveFrom(ctx, tenant, jobID, kind, estimate, "")
}

// ReserveFrom is Reserve for a job that draws on the open reservation of
// job from, of the same tenant (a pipeline's step on its pipeline's,
// docs/pipelines.md#budgets): as much of estimate as from still holds
// moves to jobID's reservation, on from's key, without a budget check,
// and only the rest is checked against the budget; the tenant's reserved
// credits grow by that rest alone. Without such a reservation (or with
// from empty) it is Reserve.
func (l *Ledger) ReserveFrom(ctx context.Context, tenant, jobID, kind string, estimate float64, from string) (string, error) {
	if key, _, ok := l.view.reservation(tenant, jobID); ok {
		return key, nil
	}
	now := l.now().UTC()
	key := SpendKey(tenant, now)
	if from != "" {
		if k, _, ok := l.view.reservation(tenant, from); ok {
			key = k
		}
	}
	settings, _ := l.view.Settings(tenant)
	var spent, reserved float64 // the period's other days
	if b := settings.Budget; b != nil {
		spent, reserved = l.view.otherDays(tenant, key, PeriodStart(b.Per, now))
	}
	_, err := l.update(ctx, key, func(cur Day) (Day, error) {
		if _, ok := cur.Reserved[jobID]; ok {
			return cur, kvcas.Unchanged
		}
		next := cur.clone()
		drawn := 0.0
		if p, ok := next.Reserved[from]; ok && from != "" {
			drawn = min(estimate, p.Credits)
			p.Credits -= drawn
			next.Reserved[from] = p
		}
		if b := settings.Budget; b != nil {
			spent, reserved := spent+cur.Spent, reserved+cur.ReservedCredits()
			if extra := estimate - drawn; extra > 0 && spent+reserved+extra > b.Credits {
				return cur, &OverBudget{Tenant: tenant, Spent: spent, Reserved: reserved, Estimate: estimate, Budget: *b,
					OnBudget: settings.EffectiveOnBudget(), Next: NextPeriod(b.Per, now)}
			}
		}
		next.Reserved[jobID] = Reservation{Credits: estimate, Kind: kind, At: now}
		return next, nil
	})
	if err != nil {
		return "", err
	}
	return key, nil
}

// Settle closes jobID's reservation under key (found in the view when key
// is empty) and adds cost to the day's spend, in one compare-and-set. A
// job without an open reservation there is settled already: nothing
// changes, so spend is counted once however often a job ends.
func (l *Ledger) Settle(ctx context.Context, tenant, jobID, key string, cost float64) error {
	if key == "" {
		var ok bool
		if key, _, ok = l.view.reservation(tenant, jobID); !ok {
			return nil
		}
	}
	_, err := l.update(ctx, key, func(cur Day) (Day, error) {
		r, ok := cur.Reserved[jobID]
		if !ok {
			return cur, kvcas.Unchanged
		}
		next := cur.clone()
		delete(next.Reserved, jobID)
		next.Spent += cost
		next.ByKind[r.Kind] += cost
		next.JobsByKind[r.Kind]++
		next.Jobs++
		return next, nil
	})
	return err
}

// update changes the day under key, starting from the view's copy, and
// hands what it wrote to the view at once.
func (l *Ledger) update(ctx context.Context, key string, change func(Day) (Day, error)) (Day, error) {
	var known *kvcas.Entry[Day]
	if d, rev, ok := l.view.known(key); ok {
		known = &kvcas.Entry[Day]{Value: d, Revision: rev}
	}
	e, err := l.days.Update(ctx, key, known, func(cur Day, _ bool) (Day, error) { return change(cur.clone()) })
	if err != nil {
		if errors.Is(err, kvcas.Unchanged) {
			return e.Value, nil
		}
		return e.Value, err
	}
	if b, merr := jsonMarshal(e.Value); merr == nil && e.Revision != 0 {
		_ = l.view.Apply(key, b, e.Revision, false)
	}
	return e.Value, nil
}

// Mark creates the scheduler marker when spec asks for more than the
// defaults (another tenant than default, another priority than 3) and the
// view shows fair scheduling off. It writes at most once per Ledger; a
// marker that exists already is fine.
func (l *Ledger) Mark(ctx context.Context, spec *jobspec.Spec) error {
	if spec == nil || (spec.EffectiveTenant() == jobspec.DefaultTenant && spec.EffectivePriority() == jobspec.DefaultPriority) {
		return nil
	}
	if l.marked.Load() || l.view.Enabled() {
		return nil
	}
	return MarkScheduler(ctx, l.kv, &l.marked)
}

// MarkScheduler creates the scheduler marker in kv unless done says it
// was; it sets done once the marker exists.
func MarkScheduler(ctx context.Context, kv jetstream.KeyValue, done *atomic.Bool) error {
	if done.Load() {
		return nil
	}
	_, err := kv.Create(ctx, SchedulerKey, []byte(`{"on":true}`))
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return fmt.Errorf("write the scheduler marker: %w", err)
	}
	done.Store(true)
	return nil
}
