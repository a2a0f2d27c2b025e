package worker_test

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// otlpSink is an OTLP/HTTP traces endpoint that keeps every span it is
// sent.
type otlpSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			s.spans = append(s.spans, ss.Spans...)
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// TestJobTraceLinksToItsProducer runs a video job whose message carries a
// lower-case traceparent through a worker exporting to an OTLP/HTTP
// endpoint, and checks the spans it sent: the process span links to the
// producer's context in a trace of its own, the steps are its
// descendants, and the terminal event carries the trace on.
func TestJobTraceLinksToItsProducer(t *testing.T) {
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", srv.URL+"/v1/traces")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	b := setup(t, setupOpts{})
	stop := b.start(t, func(c *config.Config) {
		var err error
		if c.Tracing, err = config.TracingFromEnv(); err != nil {
			t.Fatal(err)
		}
	})
	const producerTrace, producerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	ctx := testenv.Context(t, 10*time.Second)
	if err := contract.EnsureJobsStream(ctx, b.nats.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(contract.JobSubject("video"))
	m.Data = mustJSON(t, videoSpec("traced-1", "a lantern [sim:show-running]"))
	m.Header.Set(contract.HeaderMsgID, "traced-1")
	m.Header["traceparent"] = []string{"00-" + producerTrace + "-" + producerSpan + "-01"}
	if _, err := b.nats.JS.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if ev := b.await(t, "traced-1", 30*time.Second); ev.Data.Status != "succeeded" {
		t.Fatalf("event = %+v", ev)
	}
	evs, err := b.nats.JS.Stream(ctx, contract.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	last, err := evs.GetLastMsgForSubject(ctx, contract.EventSubject("video", "succeeded"))
	if err != nil {
		t.Fatal(err)
	}
	stop() // flushes the spans
	sink.mu.Lock()
	defer sink.mu.Unlock()

	process := lastSpan(sink.spans, "process sluice.jobs.video")
	if process == nil {
		t.Fatalf("no process span among %d", len(sink.spans))
	}
	if len(process.Links) != 1 || hex.EncodeToString(process.Links[0].TraceId) != producerTrace ||
		hex.EncodeToString(process.Links[0].SpanId) != producerSpan {
		t.Errorf("process links = %v, want one to the producer", process.Links)
	}
	if hex.EncodeToString(process.TraceId) == producerTrace || len(process.ParentSpanId) != 0 {
		t.Error("the process span is in the producer's trace or has a parent")
	}
	names, polls := traceSpans(sink.spans, process.TraceId)
	for _, want := range []string{"decode and validate", "preflight", "wait", "copy result-0.mp4",
		"publish sluice.events.video.submitted", "publish sluice.events.video.succeeded", "ack sluice.jobs.video"} {
		if !slices.Contains(names, want) {
			t.Errorf("no span %q in the job's trace: %v", want, names)
		}
	}
	if slices.IndexFunc(names, func(n string) bool { return strings.HasPrefix(n, "HTTP POST") || strings.HasPrefix(n, "HTTP PUT") }) < 0 {
		t.Errorf("no upstream or S3 client span in the job's trace: %v", names)
	}
	if polls < 1 {
		t.Errorf("wait span polls = %d", polls)
	}
	tp := last.Header.Get("traceparent")
	if !strings.Contains(tp, hex.EncodeToString(process.TraceId)) {
		t.Errorf("terminal event traceparent = %q, want the job's trace %x", tp, process.TraceId)
	}
}

// lastSpan is the last of spans named name, or nil.
func lastSpan(spans []*tracepb.Span, name string) *tracepb.Span {
	var last *tracepb.Span
	for _, s := range spans {
		if s.Name == name {
			last = s
		}
	}
	return last
}

// traceSpans are the names of the spans of trace, and the polls its wait
// span counted (-1 without one).
func traceSpans(spans []*tracepb.Span, trace []byte) (names []string, polls int64) {
	polls = -1
	for _, s := range spans {
		if string(s.TraceId) != string(trace) {
			continue
		}
		names = append(names, s.Name)
		if s.Name != "wait" {
			continue
		}
		for _, a := range s.Attributes {
			if a.Key == "sluice.polls" {
				polls = a.Value.GetIntValue()
			}
		}
	}
	return names, polls
}
