package tracetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// jaegerBinary finds bin/jaeger (make jaeger). Without it the test skips,
// except in CI (CI=true), where .ci/run builds it and its absence is a
// failure.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "jaeger")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found: CI builds it with make jaeger", bin)
	}
	t.Skipf("%s not found: run make jaeger (Jaeger v2 built from its Go module) to check traces against it", bin)
	return ""
}

// jaeger is a running Jaeger v2 all-in-one with in-memory storage.
type jaeger struct {
	// OTLP is the base URL of its OTLP/HTTP receiver (traces at
	// /v1/traces), Query that of its query API.
	OTLP, Query string
}

// jaegerConfig is Jaeger v2's configuration (an OpenTelemetry Collector
// one, with Jaeger's storage and query extensions): OTLP over HTTP in,
// memory storage, the query API, each on the loopback address given, and
// none of the all-in-one's fixed ports (its own metrics, the other
// receivers, sampling) that would collide with another run's.
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      http:
        endpoint: %s
processors:
  batch:
    timeout: 100ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// startJaeger runs bin/jaeger with jaegerConfig until the test ends, and
// waits until its query API answers.
func startJaeger(t *testing.T, bin string) *jaeger {
	t.Helper()
	dir := t.TempDir()
	queryHTTP, queryGRPC, otlp := freeAddr(t), freeAddr(t), freeAddr(t)
	conf := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, jaegerConfig, queryHTTP, queryGRPC, otlp), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testenv.SyncBuffer{}
	cmd := exec.Command(bin, "--config", conf)
	// Its own environment: none of the test's OTEL_* variables.
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			out := logs.String()
			t.Logf("jaeger logs (last 8 KiB):\n%s", out[max(0, len(out)-8<<10):])
		}
	})
	j := &jaeger{OTLP: "http://" + otlp, Query: "http://" + queryHTTP}
	deadline := time.After(60 * time.Second)
	for {
		if resp, err := http.Get(j.Query + "/api/services"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return j
			}
		}
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("jaeger exited: %v\n%s", err, logs)
		case <-deadline:
			t.Fatalf("jaeger's query API did not answer in 60s\n%s", logs)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// freeAddr returns a loopback address with a port free at the time of
// the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// apiTrace is a trace as Jaeger's query API (GET /api/traces/{id}) returns
// it: spans with their references (a parent is CHILD_OF, an OpenTelemetry
// link FOLLOWS_FROM) and the processes (services) that sent them.
type apiTrace struct {
	TraceID   string    `json:"traceID"`
	Spans     []apiSpan `json:"spans"`
	Processes map[string]struct {
		ServiceName string `json:"serviceName"`
	} `json:"processes"`
}

type apiSpan struct {
	TraceID       string         `json:"traceID"`
	SpanID        string         `json:"spanID"`
	OperationName string         `json:"operationName"`
	References    []apiReference `json:"references"`
	ProcessID     string         `json:"processID"`
	Tags          []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

type apiReference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// service is the name of the service that sent s.
func (tr *apiTrace) service(s apiSpan) string { return tr.Processes[s.ProcessID].ServiceName }

// span returns the first span named name, or false.
func (tr *apiTrace) span(name string) (apiSpan, bool) {
	for _, s := range tr.Spans {
		if s.OperationName == name {
			return s, true
		}
	}
	return apiSpan{}, false
}

// awaitTrace reads trace id from j's query API until it has a span of
// every name in names (spans arrive in batches), or fails the test after
// a minute with what it last read.
func (j *jaeger) awaitTrace(ctx context.Context, t *testing.T, id string, names ...string) *apiTrace {
	t.Helper()
	deadline := time.After(60 * time.Second)
	var last string
	for {
		tr, err := j.trace(ctx, id)
		if err == nil && hasAll(tr, names) {
			return tr
		}
		last = fmt.Sprint(err)
		if tr != nil {
			last = fmt.Sprintf("%d spans: %v", len(tr.Spans), operations(tr))
		}
		select {
		case <-deadline:
			t.Fatalf("trace %s: no spans %v within a minute; last read: %s", id, names, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (j *jaeger) trace(ctx context.Context, id string) (*apiTrace, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.Query+"/api/traces/"+id, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces/%s: %s", id, resp.Status)
	}
	var body struct {
		Data []apiTrace `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /api/traces/%s: %w", id, err)
	}
	if len(body.Data) != 1 {
		return nil, fmt.Errorf("GET /api/traces/%s: %d traces", id, len(body.Data))
	}
	return &body.Data[0], nil
}

func hasAll(tr *apiTrace, names []string) bool {
	for _, n := range names {
		if _, ok := tr.span(n); !ok {
			return false
		}
	}
	return true
}

func operations(tr *apiTrace) []string {
	out := make([]string, len(tr.Spans))
	for i, s := range tr.Spans {
		out[i] = s.OperationName
	}
	return out
}

// traceIDOf returns the trace id of a W3C traceparent, or "".
func traceIDOf(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || len(parts[1]) != 32 {
		return ""
	}
	return parts[1]
}
