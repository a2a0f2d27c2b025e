package console

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/tenants"
)

// tenantsView is the Tenants page (docs/console.md#tenants).
type tenantsView struct {
	Tenants []tenantRow
	// Enabled is fair scheduling on: SLUICE_TENANTS holds a setting.
	Enabled bool
	Days    int
	Err     string
	// Prices is the price table, by rule.
	Prices []priceRow
}

// priceRow is one rule of the price table.
type priceRow struct {
	Rule    string
	Credits float64
}

// tenantRow is one tenant as the page shows it; its figures are those of
// enqueue tenants list, plus its class queues and its spend per day.
type tenantRow struct {
	ID       string
	Weight   string
	Caps     []string
	Budget   *tenants.Budget
	OnBudget tenants.OnBudget
	// Bound and MaxPriority: who may act for it and how urgently
	// (docs/tenants.md#who-may-act-for-a-tenant).
	Bound       bool
	MaxPriority int
	Period      tenants.Period
	// InFlight counts its open budget reservations (enqueue tenants
	// list's IN FLIGHT): jobs submitted against the price table and not
	// yet ended.
	InFlight int
	Spent    float64
	Reserved float64
	// Used is Spent and Reserved, what the budget is checked against.
	Used float64
	// MeterLow and MeterHigh split the budget meter: fine below 3/4 of
	// the budget, a warning up to just below it, and reached at it (the
	// browser draws them green, yellow, red with optimum 0).
	MeterLow, MeterHigh float64
	WaitingForBudget    bool
	NextPeriod          time.Time
	Waiting             []jobclient.ClassWaiting
	WaitingTotal        uint64
	Chart               chart
}

func (c *Console) tenantsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	v := tenantsView{Days: chartDays}
	view, err := c.cfg.Client.Tenants(ctx)
	if err != nil {
		v.Err = "reading " + contract.TenantsBucket + ": " + err.Error()
		view = tenants.NewView(c.cfg.Now)
	}
	classes, err := c.cfg.Client.WaitingByClass(ctx)
	if err != nil && v.Err == "" {
		v.Err = "reading the class queues: " + err.Error()
	}
	v.Enabled = view.Enabled()
	v.Tenants = tenantRows(view, classes, c.cfg.Now())
	if p := view.Prices(); p != nil {
		for _, rule := range slices.Sorted(maps.Keys(p.Rules)) {
			v.Prices = append(v.Prices, priceRow{Rule: rule, Credits: p.Rules[rule]})
		}
	}
	c.render(w, "tenants", c.newPage(r, "Tenants", "tenants", v))
}

// tenantRows is every tenant with settings, ledger days or jobs in a
// class queue, sorted, as of now.
func tenantRows(view *tenants.View, classes []jobclient.ClassWaiting, now time.Time) []tenantRow {
	byTenant := map[string][]jobclient.ClassWaiting{}
	for _, cl := range classes {
		byTenant[cl.Tenant] = append(byTenant[cl.Tenant], cl)
	}
	ids := view.Tenants()
	for id := range byTenant {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	days := map[string]map[string]tenants.Day{}
	for _, d := range view.Days(now.AddDate(0, 0, -(chartDays - 1))) {
		if days[d.Tenant] == nil {
			days[d.Tenant] = map[string]tenants.Day{}
		}
		days[d.Tenant][dayKey(d.Day)] = d.Value
	}
	rows := make([]tenantRow, 0, len(ids))
	for _, id := range ids {
		s, _ := view.Settings(id)
		row := tenantRow{ID: id, Weight: strconv.FormatFloat(s.EffectiveWeight(), 'g', -1, 64),
			Budget: s.Budget, OnBudget: s.EffectiveOnBudget(), Bound: s.Bound, MaxPriority: s.MaxPriority, Period: view.Period(id), InFlight: view.Open(id),
			WaitingForBudget: view.WaitingForBudget(id), Waiting: byTenant[id]}
		for _, kind := range slices.Sorted(maps.Keys(s.MaxTasks)) {
			if n := s.MaxTasks[kind]; n > 0 {
				row.Caps = append(row.Caps, fmt.Sprintf("%s %d", kind, n))
			}
		}
		row.Spent, row.Reserved = view.Spend(id)
		row.Used = row.Spent + row.Reserved
		if b := row.Budget; b != nil {
			row.MeterLow, row.MeterHigh = 0.75*b.Credits, math.Nextafter(b.Credits, 0)
		}
		row.NextPeriod = tenants.NextPeriod(row.Period, now)
		for _, cl := range row.Waiting {
			row.WaitingTotal += cl.NotStarted()
		}
		row.Chart = spendChart(days[id], s.Budget, now)
		rows = append(rows, row)
	}
	return rows
}
