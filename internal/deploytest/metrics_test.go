package deploytest

import (
	"bufio"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// exportedSeries is every series name the worker's /metrics can carry,
// asked of the worker's own registry: each recording method is called once
// so that every vector has a child, and the families are read back with
// their types from the exposition. A histogram adds _bucket, _sum and
// _count; a summary _sum and _count.
func exportedSeries(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	m.BuildInfo(buildinfo.Info{Version: "v0", Commit: "c", GoVersion: "go"})
	m.JobFinished("video", "succeeded", time.Second)
	m.JobFailed("video", "upstream_error", "submit")
	m.Waiting("video", 1)
	m.WaitingClass("video", "default", 3, 1)
	m.Orphaned("video")
	m.JobRetried("video")
	m.Held("video", 1)
	m.Settled("video", "ack")
	m.PollBatch(3)
	m.PollWatched(3)
	m.ArtifactBytes("video", 10)
	m.JetStreamWaiting("sweep", true)
	m.JetStreamFailed("sweep", "timeout")
	m.NATSMoved()
	m.ContainerNotDeleted(false)
	m.Stuck("received", 1)
	m.Leftovers("container", 1, true)
	m.Quota("media", 8, 8, 1, 1, 0, 0)
	m.QuotaRate("media", 5)
	m.QuotaBoardOp("leases.media", "write", "conflict")
	m.ComputeToken("renewal")
	m.APIRequest("POST /v1/jobs", 202, "none")
	m.WebhookDelivered()
	m.StoreWaiting(true)
	m.StoreProbeFailed()
	m.SpansDropped("queue_full", 1)
	m.WatchTenants(func() []metrics.TenantSpend {
		return []metrics.TenantSpend{{Tenant: "acme", Spent: 5, Budget: 100, HasBudget: true}}
	})
	fail := roundTripper(func(*http.Request) (*http.Response, error) { return nil, errors.New("no answer") })
	req := httptest.NewRequest(http.MethodGet, "http://upstream.invalid/x", nil)
	_, _ = m.Transport("media", func(string, string) string { return "GET /x" }, fail).RoundTrip(req)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	series := map[string]bool{}
	sc := bufio.NewScanner(rec.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		name, typ := f[2], f[3]
		series[name] = true
		switch typ {
		case "histogram":
			series[name+"_bucket"], series[name+"_sum"], series[name+"_count"] = true, true, true
		case "summary":
			series[name+"_sum"], series[name+"_count"] = true, true
		}
	}
	declared := declaredMetricNames(t)
	for name := range declared {
		if !series[name] {
			t.Errorf("internal/metrics declares %s but exportedSeries did not make it appear: call its recording method there", name)
		}
	}
	if len(declared) == 0 {
		t.Fatal("found no sluice_* metric names in internal/metrics")
	}
	return series
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// declaredMetricNames reads every "sluice_*" string literal of
// internal/metrics' code: the names its collectors are built with.
func declaredMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "internal", "metrics", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err == nil && strings.HasPrefix(s, "sluice_") && !strings.ContainsAny(s, " ,.") {
				names[s] = true
			}
			return true
		})
	}
	return names
}

func TestExportedSeries(t *testing.T) {
	series := exportedSeries(t)
	for _, want := range []string{"sluice_jobs_total", "sluice_jobs_waiting", "sluice_job_duration_seconds_bucket", "go_goroutines", "process_cpu_seconds_total"} {
		if !series[want] {
			t.Errorf("exported series lack %s", want)
		}
	}
}
