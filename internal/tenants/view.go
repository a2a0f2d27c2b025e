package tenants

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/metrics"
)

// View is the SLUICE_TENANTS bucket kept in memory by one watch: the
// tenants' settings, the price table, the scheduler marker and the ledger's
// day keys. Reading it costs no NATS operation. A View is safe for
// concurrent use; the zero View is empty (nothing set).
type View struct {
	mu       sync.RWMutex
	settings map[string]Settings
	prices   *Prices
	marker   bool
	days     map[string]dayEntry // by ledger key
	now      func() time.Time
}

// dayEntry is a ledger day as the view last saw it, with its revision.
type dayEntry struct {
	tenant string
	day    time.Time
	value  Day
	rev    uint64
}

// NewView returns an empty View; Load and Watch fill it.
func NewView(now func() time.Time) *View {
	if now == nil {
		now = time.Now
	}
	return &View{settings: map[string]Settings{}, days: map[string]dayEntry{}, now: now}
}

// Watch starts a View on kv: it returns once the bucket's current values
// are in, and keeps the View up to date until ctx ends. A value that does
// not decode is logged and left out (the CLI never writes one).
func Watch(ctx context.Context, kv jetstream.KeyValue, now func() time.Time, log zerolog.Logger) (*View, error) {
	v := NewView(now)
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch bucket %s: %w", kv.Bucket(), err)
	}
	for loaded := false; !loaded; {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("watch bucket %s: closed while loading", kv.Bucket())
			}
			if e == nil {
				loaded = true
				break
			}
			v.note(e, log)
		case <-ctx.Done():
			_ = w.Stop()
			return nil, ctx.Err()
		}
	}
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					v.note(e, log)
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return v, nil
}

// note applies one entry of the watch.
func (v *View) note(e jetstream.KeyValueEntry, log zerolog.Logger) {
	deleted := e.Operation() != jetstream.KeyValuePut
	if err := v.Apply(e.Key(), e.Value(), e.Revision(), deleted); err != nil {
		log.Warn().Err(err).Str("key", e.Key()).Msg("ignoring a value of SLUICE_TENANTS that does not decode")
	}
}

// Apply sets key to value (or removes it when deleted) at revision rev.
// A ledger value older than the one held is ignored.
func (v *View) Apply(key string, value []byte, rev uint64, deleted bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case key == SchedulerKey:
		v.marker = !deleted
	case key == PricesKey:
		v.prices = nil
		if !deleted {
			var p Prices
			if err := json.Unmarshal(value, &p); err != nil {
				return err
			}
			v.prices = &p
		}
	case strings.HasPrefix(key, TenantKeyPrefix):
		id := strings.TrimPrefix(key, TenantKeyPrefix)
		delete(v.settings, id)
		if !deleted {
			var s Settings
			if err := json.Unmarshal(value, &s); err != nil {
				return err
			}
			v.settings[id] = s
		}
	case strings.HasPrefix(key, SpendKeyPrefix):
		return v.applyDay(key, value, rev, deleted)
	}
	return nil
}

func (v *View) applyDay(key string, value []byte, rev uint64, deleted bool) error {
	tenant, day, ok := parseSpendKey(key)
	if !ok {
		return errors.New("not a ledger key")
	}
	if cur, ok := v.days[key]; ok && cur.rev > rev {
		return nil
	}
	if deleted {
		delete(v.days, key)
		return nil
	}
	var d Day
	if err := json.Unmarshal(value, &d); err != nil {
		return err
	}
	v.days[key] = dayEntry{tenant: tenant, day: day, value: d, rev: rev}
	return nil
}

// Enabled reports whether fair scheduling is on: the bucket holds a
// tenant's settings, a price table or the scheduler marker.
func (v *View) Enabled() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.marker || v.prices != nil || len(v.settings) > 0
}

// Marked reports whether the scheduler marker is set.
func (v *View) Marked() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.marker
}

// Settings returns tenant's settings, and whether it has any.
func (v *View) Settings(tenant string) (Settings, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s, ok := v.settings[tenant]
	return s, ok
}

// Weight is tenant's weight, 1 by default.
func (v *View) Weight(tenant string) float64 {
	s, _ := v.Settings(tenant)
	return s.EffectiveWeight()
}

// MaxTasks is tenant's cap of tasks of kind upstream at once; 0 is none.
func (v *View) MaxTasks(tenant, kind string) int {
	s, _ := v.Settings(tenant)
	return s.MaxTasks[kind]
}

// WaitingForBudget reports whether tenant's budget for the current period
// is spent (spent and reserved reach it) and its jobs wait for the next.
func (v *View) WaitingForBudget(tenant string) bool {
	s, ok := v.Settings(tenant)
	if !ok || s.Budget == nil || s.EffectiveOnBudget() != OnBudgetWait {
		return false
	}
	spent, reserved := v.Spend(tenant)
	return spent+reserved >= s.Budget.Credits
}

// BudgetHolds reports whether tenant's jobs of kind wait for budget: the
// tenant is waiting for budget and the price table prices some unit of
// kind. A job of a kind the table does not price is never reserved, so
// no budget holds it back (the scheduler's Policy).
func (v *View) BudgetHolds(tenant, kind string) bool {
	return v.WaitingForBudget(tenant) && v.Prices().PricesKind(kind)
}

// Prices returns the price table, nil when none is set.
func (v *View) Prices() *Prices {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.prices
}

// Tenants lists the tenants with settings or ledger days, sorted.
func (v *View) Tenants() []string {
	v.mu.RLock()
	defer v.mu.RUnlock()
	set := map[string]bool{}
	for id := range v.settings {
		set[id] = true
	}
	for _, e := range v.days {
		set[e.tenant] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// Period is the period tenant's spend is counted over: its budget's, a
// month without one.
func (v *View) Period(tenant string) Period {
	if s, ok := v.Settings(tenant); ok && s.Budget != nil {
		return s.Budget.Per
	}
	return PerMonth
}

// Spend is what tenant spent and holds reserved in its current period
// (see Period).
func (v *View) Spend(tenant string) (spent, reserved float64) {
	start := PeriodStart(v.Period(tenant), v.now())
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, e := range v.days {
		if e.tenant == tenant && !e.day.Before(start) {
			spent += e.value.Spent
			reserved += e.value.ReservedCredits()
		}
	}
	return spent, reserved
}

// Open counts tenant's open reservations, on any day.
func (v *View) Open(tenant string) int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	n := 0
	for _, e := range v.days {
		if e.tenant == tenant {
			n += len(e.value.Reserved)
		}
	}
	return n
}

// DaySpend is one ledger day of one tenant.
type DaySpend struct {
	Tenant string
	Day    time.Time
	Value  Day
}

// Days returns the ledger days from since on (every day when zero), by
// tenant and day.
func (v *View) Days(since time.Time) []DaySpend {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var out []DaySpend
	for _, e := range v.days {
		if since.IsZero() || !e.day.Before(PeriodStart(PerDay, since)) {
			out = append(out, DaySpend{Tenant: e.tenant, Day: e.day, Value: e.value.clone()})
		}
	}
	slices.SortFunc(out, func(a, b DaySpend) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), a.Day.Compare(b.Day))
	})
	return out
}

// reservation finds tenant's open reservation of jobID on any day.
func (v *View) reservation(tenant, jobID string) (key string, r Reservation, ok bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for k, e := range v.days {
		if r, ok := e.value.Reserved[jobID]; ok && e.tenant == tenant {
			return k, r, true
		}
	}
	return "", Reservation{}, false
}

// known is the ledger day under key as the view holds it, nil when none.
func (v *View) known(key string) (Day, uint64, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	e, ok := v.days[key]
	if !ok {
		return Day{}, 0, false
	}
	return e.value.clone(), e.rev, true
}

// otherDays sums tenant's spent and reserved credits on the days of the
// period from start, except the day under key.
func (v *View) otherDays(tenant, key string, start time.Time) (spent, reserved float64) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for k, e := range v.days {
		if k != key && e.tenant == tenant && !e.day.Before(start) {
			spent += e.value.Spent
			reserved += e.value.ReservedCredits()
		}
	}
	return spent, reserved
}

// MetricsSpend is every known tenant's spend this period and budget, for
// the worker's metrics.
func (v *View) MetricsSpend() []metrics.TenantSpend {
	var out []metrics.TenantSpend
	for _, id := range v.Tenants() {
		spent, _ := v.Spend(id)
		t := metrics.TenantSpend{Tenant: id, Spent: spent}
		if s, ok := v.Settings(id); ok && s.Budget != nil {
			t.Budget, t.HasBudget = s.Budget.Credits, true
		}
		out = append(out, t)
	}
	return out
}
