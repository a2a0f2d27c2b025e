package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/tenants"
)

var chartNow = time.Date(2026, 11, 20, 15, 4, 5, 0, time.UTC)

func TestSpendChart(t *testing.T) {
	t.Parallel()
	day := func(daysAgo int) string { return dayKey(chartNow.AddDate(0, 0, -daysAgo)) }
	days := map[string]tenants.Day{
		day(0):  {Spent: 10, Jobs: 2, Reserved: map[string]tenants.Reservation{"j9": {Credits: 10, Kind: "video"}}},
		day(3):  {Spent: 5, Jobs: 1},
		day(29): {Spent: 1, Jobs: 1},   // the first day shown
		day(30): {Spent: 400, Jobs: 9}, // before the window: not drawn, not in the scale
		day(7):  {},                    // a day with nothing: no bar
	}
	t.Run("bars and scale", func(t *testing.T) {
		c := spendChart(days, &tenants.Budget{Credits: 100, Per: tenants.PerMonth}, chartNow)
		if len(c.Bars) != 3 {
			t.Fatalf("%d bars, want 3: %+v", len(c.Bars), c.Bars)
		}
		if c.Max != "20" || c.Total != "16" || c.BudgetY != "" {
			t.Errorf("max %q, total %q, budget line %q; want 20, 16 and none for a monthly budget", c.Max, c.Total, c.BudgetY)
		}
		if c.First != "Oct 22" || c.Last != "Nov 20" {
			t.Errorf("dates %s to %s, want Oct 22 to Nov 20", c.First, c.Last)
		}
		first, today := c.Bars[0], c.Bars[2]
		if !strings.HasPrefix(first.Title, day(29)+": 1 credits spent by 1 jobs") || first.ReservedH != "" {
			t.Errorf("first bar %+v", first)
		}
		// Today: 10 spent and 10 reserved fill the plot to its top.
		if today.H != "60.0" || today.ReservedH != "60.0" || today.ReservedY != num(chartTop) {
			t.Errorf("today's bar %+v, want spent and reserved 60 each up to the top", today)
		}
		if !strings.Contains(today.Title, "10 reserved by 1 open") {
			t.Errorf("today's title %q", today.Title)
		}
	})
	t.Run("a daily budget above the spend sets the scale", func(t *testing.T) {
		c := spendChart(days, &tenants.Budget{Credits: 40, Per: tenants.PerDay}, chartNow)
		if c.Max != "40" || c.BudgetY != num(chartTop) {
			t.Errorf("max %q, budget line at %q; want 40 at the top", c.Max, c.BudgetY)
		}
	})
	t.Run("nothing spent", func(t *testing.T) {
		c := spendChart(nil, nil, chartNow)
		if len(c.Bars) != 0 || c.Max != "1" || c.Total != "0" {
			t.Errorf("empty chart %+v", c)
		}
	})
}

// tenantRows shows enqueue tenants list's figures for every tenant with
// settings, ledger days or waiting jobs.
func TestTenantRows(t *testing.T) {
	t.Parallel()
	v := tenants.NewView(func() time.Time { return chartNow })
	apply := func(key string, value any) {
		t.Helper()
		b, _ := json.Marshal(value)
		if err := v.Apply(key, b, 1, false); err != nil {
			t.Fatal(err)
		}
	}
	apply(tenants.TenantKey("acme"), tenants.Settings{Weight: 3, MaxTasks: map[string]int{"video": 4, "speech": 0},
		Budget: &tenants.Budget{Credits: 15, Per: tenants.PerMonth}})
	apply(tenants.SpendKey("acme", chartNow), tenants.Day{Spent: 10, Jobs: 2,
		Reserved: map[string]tenants.Reservation{"a3": {Credits: 5, Kind: "video"}}})
	apply(tenants.SpendKey("gone", chartNow.AddDate(0, -3, 0)), tenants.Day{Spent: 2, Jobs: 1})
	classes := []jobclient.ClassWaiting{
		{Kind: "video", Priority: 1, Tenant: "acme", Messages: 2},
		{Kind: "video", Priority: 5, Tenant: "acme", Messages: 7},
		{Kind: "speech", Priority: 3, Tenant: "default", Messages: 1},
	}
	rows := tenantRows(v, classes, chartNow)
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	if strings.Join(ids, ",") != "acme,default,gone" {
		t.Fatalf("tenants %v, want acme, default (waiting only), gone (ledger only)", ids)
	}
	acme := rows[0]
	if acme.Weight != "3" || strings.Join(acme.Caps, ",") != "video 4" || acme.Period != tenants.PerMonth ||
		acme.InFlight != 1 || acme.Spent != 10 || acme.Reserved != 5 || acme.Used != 15 || !acme.WaitingForBudget ||
		acme.WaitingTotal != 9 || len(acme.Waiting) != 2 || len(acme.Chart.Bars) != 1 {
		t.Errorf("acme = %+v", acme)
	}
	if !acme.NextPeriod.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("acme's next period %s", acme.NextPeriod)
	}
	def, gone := rows[1], rows[2]
	if def.Weight != "1" || def.Budget != nil || def.WaitingTotal != 1 || def.WaitingForBudget {
		t.Errorf("default = %+v", def)
	}
	if gone.Spent != 0 || len(gone.Chart.Bars) != 0 || gone.WaitingTotal != 0 {
		t.Errorf("gone (spent 3 months ago) = %+v", gone)
	}
}
