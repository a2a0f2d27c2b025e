package metrics

import "github.com/prometheus/client_golang/prometheus"

// TenantSpend is one tenant's spend this period and its budget, as the
// worker's view of SLUICE_TENANTS holds them.
type TenantSpend struct {
	Tenant string
	// Spent is the credits spent this period (settled jobs).
	Spent float64
	// Budget is the period's budget when HasBudget.
	Budget    float64
	HasBudget bool
}

var (
	tenantSpendDesc = prometheus.NewDesc("sluice_tenant_spend_credits",
		"Credits a tenant spent in its current budget period (a calendar month without a budget), from the ledger.", []string{"tenant"}, nil)
	tenantBudgetDesc = prometheus.NewDesc("sluice_tenant_budget_credits",
		"A tenant's budget for its current period, where it has one.", []string{"tenant"}, nil)
)

// tenantCollector reads the tenants' spend at each scrape.
type tenantCollector struct{ spend func() []TenantSpend }

func (c tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tenantSpendDesc
	ch <- tenantBudgetDesc
}

func (c tenantCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.spend() {
		ch <- prometheus.MustNewConstMetric(tenantSpendDesc, prometheus.GaugeValue, t.Spent, t.Tenant)
		if t.HasBudget {
			ch <- prometheus.MustNewConstMetric(tenantBudgetDesc, prometheus.GaugeValue, t.Budget, t.Tenant)
		}
	}
}

// WatchTenants exports sluice_tenant_spend_credits and
// sluice_tenant_budget_credits, read from spend at each scrape. Call it
// once.
func (m *Metrics) WatchTenants(spend func() []TenantSpend) {
	if m == nil {
		return
	}
	m.reg.MustRegister(tenantCollector{spend: spend})
}
