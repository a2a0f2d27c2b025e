package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/metrics"
)

func TestWatchTenants(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.WatchTenants(func() []metrics.TenantSpend {
		return []metrics.TenantSpend{
			{Tenant: "acme", Spent: 12.5, Budget: 100, HasBudget: true},
			{Tenant: "default", Spent: 3},
		}
	})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sluice_tenant_spend_credits{tenant="acme"} 12.5`,
		`sluice_tenant_spend_credits{tenant="default"} 3`,
		`sluice_tenant_budget_credits{tenant="acme"} 100`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), `sluice_tenant_budget_credits{tenant="default"}`) {
		t.Error("a tenant without a budget has a budget gauge")
	}
}
