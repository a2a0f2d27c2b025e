package tenants_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/tenants"
	"github.com/sluice-dev/sluice/internal/testenv"
)

type ledgerBundle struct {
	kv  jetstream.KeyValue
	ctx context.Context
}

// newLedger starts a worker's view and ledger on the bundle's bucket.
func (b *ledgerBundle) newLedger(t *testing.T) *tenants.Ledger {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	t.Cleanup(cancel)
	v, err := tenants.Watch(ctx, b.kv, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return tenants.NewLedger(b.kv, nil, v, nil)
}

func (b *ledgerBundle) put(t *testing.T, key string, v any) {
	t.Helper()
	data, _ := json.Marshal(v)
	if _, err := b.kv.Put(b.ctx, key, data); err != nil {
		t.Fatal(err)
	}
}

func (b *ledgerBundle) day(t *testing.T, tenant string) tenants.Day {
	t.Helper()
	e, err := b.kv.Get(b.ctx, tenants.SpendKey(tenant, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	var d tenants.Day
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// waitFor polls cond for a generous deadline: the views follow the bucket
// through a watch.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func setupLedger(t *testing.T) *ledgerBundle {
	t.Helper()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.TenantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	return &ledgerBundle{kv: kv, ctx: ctx}
}

// TestLedgerConcurrentReservationsKeepTheBudget: concurrent reservations never exceed the budget.
func TestLedgerConcurrentReservationsKeepTheBudget(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	b.put(t, tenants.TenantKey("acme"), tenants.Settings{Budget: &tenants.Budget{Credits: 10, Per: tenants.PerMonth}})
	ledgers := []*tenants.Ledger{b.newLedger(t), b.newLedger(t), b.newLedger(t)}
	for _, l := range ledgers {
		waitFor(t, "the settings", func() bool { _, ok := l.View().Settings("acme"); return ok })
	}
	var mu sync.Mutex
	granted, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Go(func() {
			_, err := ledgers[i%3].Reserve(b.ctx, "acme", fmt.Sprintf("job-%d", i), "video", 1.5)
			mu.Lock()
			defer mu.Unlock()
			var over *tenants.OverBudget
			switch {
			case err == nil:
				granted++
			case errors.As(err, &over):
				refused++
			default:
				t.Errorf("reserve job-%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if granted != 6 || refused != 18 {
		t.Errorf("granted %d, refused %d; want 6 and 18 (10 credits at 1.5 each)", granted, refused)
	}
	if d := b.day(t, "acme"); d.ReservedCredits() > 10 {
		t.Errorf("reserved %v credits, over the budget of 10", d.ReservedCredits())
	}
}

// TestLedgerSettlesOnce: a reservation is idempotent and settles once.
func TestLedgerSettlesOnce(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	l := b.newLedger(t)
	key, err := l.Reserve(b.ctx, "acme", "clip-1", "video", 5)
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.Reserve(b.ctx, "acme", "clip-1", "video", 5)
	if err != nil || again != key {
		t.Fatalf("second reserve = %q, %v; want %q", again, err, key)
	}
	for range 2 {
		if err := l.Settle(b.ctx, "acme", "clip-1", key, 4); err != nil {
			t.Fatal(err)
		}
	}
	d := b.day(t, "acme")
	if d.Spent != 4 || d.Jobs != 1 || len(d.Reserved) != 0 || d.ByKind["video"] != 4 {
		t.Errorf("day = %+v, want 4 credits spent once by one video job", d)
	}
}

// TestLedgerDeadWorkersReservation: a dead worker's reservation is settled by the redelivered job.
func TestLedgerDeadWorkersReservation(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	dead := b.newLedger(t)
	key, err := dead.Reserve(b.ctx, "acme", "clip-2", "speech", 2)
	if err != nil {
		t.Fatal(err)
	}
	// The job goes to another worker, whose view sees the open
	// reservation: it reserves nothing more and settles that one.
	next := b.newLedger(t)
	waitFor(t, "the reservation", func() bool { return next.View().Open("acme") == 1 })
	got, err := next.Reserve(b.ctx, "acme", "clip-2", "speech", 2)
	if err != nil || got != key {
		t.Fatalf("reserve on the next worker = %q, %v; want %q", got, err, key)
	}
	if err := next.Settle(b.ctx, "acme", "clip-2", "", 1.5); err != nil {
		t.Fatal(err)
	}
	if err := dead.Settle(b.ctx, "acme", "clip-2", key, 1.5); err != nil {
		t.Fatal(err)
	}
	d := b.day(t, "acme")
	if d.Spent != 1.5 || d.Jobs != 1 || len(d.Reserved) != 0 {
		t.Errorf("day = %+v, want 1.5 credits spent once", d)
	}
	waitFor(t, "the spend in the view", func() bool { s, _ := next.View().Spend("acme"); return s == 1.5 })
}

// TestLedgerMarker: the marker is written once and turns the view on.
func TestLedgerMarker(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	l := b.newLedger(t)
	if l.View().Enabled() {
		t.Fatal("an empty bucket's view is enabled")
	}
	if err := l.Mark(b.ctx, &jobspec.Spec{Kind: jobspec.KindVideo}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.kv.Get(b.ctx, tenants.SchedulerKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a default job wrote the marker: %v", err)
	}
	other := b.newLedger(t)
	for _, l := range []*tenants.Ledger{l, other, l} {
		if err := l.Mark(b.ctx, &jobspec.Spec{Kind: jobspec.KindVideo, Tenant: "acme"}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the view on", l.View().Enabled)
	if w := l.View().Weight("acme"); w != 1 {
		t.Errorf("default weight = %v", w)
	}
}

// TestLedgerOverBudgetSaysSpentAndReserved: the refusal names the credits
// spent and those reserved by jobs still running apart, and a daily budget
// says "today"; a settled job is counted under its kind.
func TestLedgerOverBudgetSaysSpentAndReserved(t *testing.T) {
	t.Parallel()
	b := setupLedger(t)
	b.put(t, tenants.TenantKey("acme"), tenants.Settings{Budget: &tenants.Budget{Credits: 10, Per: tenants.PerDay}})
	l := b.newLedger(t)
	waitFor(t, "the settings", func() bool { _, ok := l.View().Settings("acme"); return ok })
	key, err := l.Reserve(b.ctx, "acme", "clip-1", "video", 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(b.ctx, "acme", "clip-1", key, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(b.ctx, "acme", "clip-2", "video", 5); err != nil {
		t.Fatal(err)
	}
	_, err = l.Reserve(b.ctx, "acme", "clip-3", "video", 5)
	want := "tenant acme spent 3 and reserved 5 of 10 credits today (this job needs 5)"
	if err == nil || err.Error() != want {
		t.Errorf("third reserve = %v, want %q", err, want)
	}
	if d := b.day(t, "acme"); d.JobsByKind["video"] != 1 {
		t.Errorf("jobs by kind = %v, want video 1", d.JobsByKind)
	}
}
