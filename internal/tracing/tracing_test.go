package tracing

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestProducerReadsHeadersInAnyCase(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header nats.Header
		valid  bool
		logged bool
	}{
		{"lower case", nats.Header{"traceparent": {parent}}, true, false},
		{"canonical", nats.Header{"Traceparent": {parent}}, true, false},
		{"upper case", nats.Header{"TRACEPARENT": {parent}}, true, false},
		{"absent", nats.Header{"Nats-Msg-Id": {"a"}}, false, false},
		{"malformed", nats.Header{"traceparent": {"00-zz-yy-01"}}, false, true},
		{"all-zero trace id", nats.Header{"traceparent": {"00-00000000000000000000000000000000-b7ad6b7169203331-01"}}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := zerolog.New(&buf).Level(zerolog.DebugLevel)
			sc := Producer(Propagator(), tc.header, &log)
			if sc.IsValid() != tc.valid {
				t.Fatalf("valid = %v, want %v", sc.IsValid(), tc.valid)
			}
			if tc.valid && sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
				t.Errorf("trace id = %s", sc.TraceID())
			}
			if logged := strings.Contains(buf.String(), "malformed traceparent"); logged != tc.logged {
				t.Errorf("logged = %v, want %v: %s", logged, tc.logged, buf.String())
			}
		})
	}
}

func TestHeaderSetReplacesAnyCase(t *testing.T) {
	h := Header(nats.Header{"Traceparent": {"old"}})
	h.Set("traceparent", "new")
	if len(h) != 1 || h["traceparent"][0] != "new" {
		t.Fatalf("header = %v", h)
	}
}

func TestInjectWritesTheSpanContext(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, span := tp.Tracer("t").Start(context.Background(), "job")
	h := nats.Header{}
	Inject(ctx, Propagator(), h)
	span.End()
	want := span.SpanContext().TraceID().String()
	if got := h.Get("traceparent"); !strings.Contains(got, want) {
		t.Fatalf("traceparent = %q, want trace %s", got, want)
	}
	h = nats.Header{}
	Inject(context.Background(), Propagator(), h)
	if len(h) != 0 {
		t.Errorf("no span, headers = %v", h)
	}
}

func TestLinkToProducer(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	producer := Producer(Propagator(), nats.Header{"traceparent": {parent}}, nil)
	_, span := tp.Tracer("t").Start(context.Background(), "process", trace.WithNewRoot(), LinkTo(producer))
	span.End()
	got := exp.GetSpans()
	if len(got) != 1 || len(got[0].Links) != 1 {
		t.Fatalf("spans = %+v", got)
	}
	if got[0].Links[0].SpanContext.TraceID() != producer.TraceID() || got[0].Parent.IsValid() {
		t.Errorf("link = %+v, parent = %v: want a link to the producer and no parent", got[0].Links[0], got[0].Parent)
	}
	if got[0].SpanContext.TraceID() == producer.TraceID() {
		t.Error("the process span joined the producer's trace")
	}
}

func TestTransportTracesOnlyRequestsInsideAJob(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer srv.Close()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	client := &http.Client{Transport: Transport(tp, Propagator(), nil)}
	get := func(ctx context.Context) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "job")
	get(ctx)
	span.End()
	if len(seen) != 2 || seen[0] != "" || !strings.Contains(seen[1], span.SpanContext().TraceID().String()) {
		t.Fatalf("traceparent sent = %q", seen)
	}
	if n := len(exp.GetSpans()); n != 2 {
		t.Errorf("spans = %d, want the job's and one client span", n)
	}
	if base := http.DefaultTransport; Transport(noop.NewTracerProvider(), Propagator(), base) != base {
		t.Error("the no-op provider wraps the transport")
	}
}

// failingExporter refuses every batch.
type failingExporter struct{ sdktrace.SpanExporter }

func (failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	return context.DeadlineExceeded
}

func TestBoundedQueueCountsEverySpanLost(t *testing.T) {
	var mu sync.Mutex
	dropped := map[string]int{}
	count := func(reason string, n int) { mu.Lock(); dropped[reason] += n; mu.Unlock() }
	q := &boundedQueue{max: 3, dropped: count}
	q.exporter = countingExporter{SpanExporter: failingExporter{tracetest.NewInMemoryExporter()}, q: q}
	// A batch processor that exports only at ForceFlush: the queue fills.
	q.SpanProcessor = sdktrace.NewBatchSpanProcessor(q.exporter, sdktrace.WithBatchTimeout(1<<62), sdktrace.WithMaxExportBatchSize(100))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	for range 5 {
		_, s := tp.Tracer("t").Start(context.Background(), "s")
		s.End()
	}
	_ = tp.ForceFlush(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if dropped["queue_full"] != 2 || dropped["export_failed"] != 3 {
		t.Fatalf("dropped = %v, want 2 queue_full and 3 export_failed", dropped)
	}
	if q.pending.Load() != 0 {
		t.Errorf("pending = %d after the flush", q.pending.Load())
	}
}

func TestStartIsOffWithoutAnEndpoint(t *testing.T) {
	for _, cfg := range []Config{{}, {Endpoint: "http://127.0.0.1:1", Exporter: ExporterNone}, {Endpoint: "http://127.0.0.1:1", Disabled: true}} {
		tr, err := Start(context.Background(), cfg, ServiceWorker, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, off := tr.Provider.(noop.TracerProvider); !off {
			t.Errorf("%+v: provider %T, want the no-op one", cfg, tr.Provider)
		}
	}
	for _, cfg := range []Config{{Protocol: "grpc"}, {Exporter: "zipkin"}} {
		if _, err := Start(context.Background(), cfg, ServiceWorker, nil); err == nil || !strings.Contains(err.Error(), "OTEL_") {
			t.Errorf("%+v: err = %v, want one naming the variable", cfg, err)
		}
	}
}
