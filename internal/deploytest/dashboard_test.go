package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// dashboardPath is the Grafana dashboard operators import; the chart ships
// the same file as a ConfigMap for Grafana's sidecar.
const dashboardPath = "deploy/helm/sluice/dashboards/sluice.json"

// fleetGauges report a figure of the whole fleet, the same on every
// worker: a panel takes their max across workers, never their sum.
var fleetGauges = map[string]bool{
	"sluice_jobs_waiting":       true,
	"sluice_quota_in_use":       true,
	"sluice_quota_limit":        true,
	"sluice_quota_waiting_jobs": true,
	"sluice_quota_rate_limit":   true,
	// Every worker reads the same ledger and class queues.
	"sluice_tenant_spend_credits":  true,
	"sluice_tenant_budget_credits": true,
	"sluice_jobs_waiting_class":    true,
}

// dashboardCovers are the metrics the dashboard must show: throughput by
// kind and outcome, queue depth, waiting for quota, quota in use, upstream
// requests, errors and p95 latency by endpoint, artifact bytes, JetStream
// waiting, tenants' spend.
var dashboardCovers = []string{
	"sluice_jobs_total", "sluice_jobs_waiting", "sluice_quota_waiting_jobs", "sluice_quota_in_use",
	"sluice_upstream_requests_total", "sluice_upstream_request_duration_seconds_bucket", "sluice_artifact_bytes_total", "sluice_jetstream_waiting",
	"sluice_tenant_spend_credits",
}

type grafanaDashboard struct {
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaPanel struct {
	Title   string         `json:"title"`
	Type    string         `json:"type"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// grafanaVars are Grafana's own interval variables, replaced by durations
// before parsing; a dashboard variable inside a label matcher's string
// ($kind) needs no replacing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// promql parses as Prometheus does by default: no experimental functions.
var promql = parser.NewParser(parser.Options{})

var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)

func TestDashboardQueries(t *testing.T) {
	series := exportedSeries(t)
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), dashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	used := map[string]bool{}
	var panels []grafanaPanel
	var flatten func([]grafanaPanel)
	flatten = func(ps []grafanaPanel) {
		for _, p := range ps {
			panels = append(panels, p)
			flatten(p.Panels)
		}
	}
	flatten(d.Panels)
	queries := 0
	for _, p := range panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			queries++
			where := p.Title + " / " + target.RefID
			expr, err := promql.ParseExpr(grafanaVars.Replace(target.Expr))
			if err != nil {
				t.Errorf("%s: %q does not parse: %v", where, target.Expr, err)
				continue
			}
			parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
				vs, ok := node.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				used[vs.Name] = true
				if !series[vs.Name] {
					t.Errorf("%s: %s is not a metric the worker exports", where, vs.Name)
				}
				if fleetGauges[vs.Name] {
					if op := innermostAggregation(path); op != parser.MAX {
						t.Errorf("%s: %s is the same on every worker; aggregate it with max, not %v", where, vs.Name, op)
					}
				}
				return nil
			})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			if json.Unmarshal(v.Query, &s) != nil {
				t.Errorf("variable %s: query is neither an object nor a string", v.Name)
				continue
			}
			q.Query = s
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, q.Query)
			continue
		}
		if !series[m[1]] {
			t.Errorf("variable %s: %s is not a metric the worker exports", v.Name, m[1])
		}
	}
	for _, want := range dashboardCovers {
		if !used[want] {
			t.Errorf("no panel shows %s", want)
		}
	}
	t.Logf("%d panels, %d queries, %d metrics", len(panels), queries, len(used))
}

// innermostAggregation is the operator of the aggregation nearest to a
// selector on its path from the root, or ILLEGAL when none encloses it.
func innermostAggregation(path []parser.Node) parser.ItemType {
	for i := len(path) - 1; i >= 0; i-- {
		if agg, ok := path[i].(*parser.AggregateExpr); ok {
			return agg.Op
		}
	}
	return parser.ItemType(0)
}

// TestInnermostAggregation proves the queue-depth rule catches a sum.
func TestInnermostAggregation(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want parser.ItemType
	}{
		{`max by (kind) (sluice_jobs_waiting)`, parser.MAX},
		{`sum by (kind) (sluice_jobs_waiting)`, parser.SUM},
		{`sum(max by (kind) (sluice_jobs_waiting))`, parser.MAX},
		{`sluice_jobs_waiting`, parser.ItemType(0)},
	} {
		expr, err := promql.ParseExpr(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		var got parser.ItemType
		parser.Inspect(expr, func(node parser.Node, path []parser.Node) error {
			if _, ok := node.(*parser.VectorSelector); ok {
				got = innermostAggregation(path)
			}
			return nil
		})
		if got != tc.want {
			t.Errorf("%s: innermost aggregation %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// tenantLabelled are the metrics with a tenant label: their panels follow
// the dashboard's tenant variable.
var tenantLabelled = []string{"sluice_tenant_spend_credits", "sluice_tenant_budget_credits", "sluice_jobs_waiting_class"}

// TestDashboardTenantVariable: the dashboard has a tenant variable and
// every query of a tenant-labelled metric filters on it.
func TestDashboardTenantVariable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), dashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	found := false
	for _, v := range d.Templating.List {
		found = found || (v.Name == "tenant" && v.Type == "query")
	}
	if !found {
		t.Error("the dashboard has no tenant variable")
	}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, target := range p.Targets {
				for _, m := range tenantLabelled {
					if strings.Contains(target.Expr, m) && !strings.Contains(target.Expr, m+`{tenant=~"$tenant"`) {
						t.Errorf("%s / %s: %s does not filter on $tenant: %s", p.Title, target.RefID, m, target.Expr)
					}
				}
			}
		}
	}
	walk(d.Panels)
}
