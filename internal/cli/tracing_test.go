package cli

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// otlpSink is an OTLP/HTTP traces endpoint that keeps every span it is
// sent, with its resource's service.name.
type otlpSink struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string
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
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				s.services = append(s.services, a.Value.GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			s.spans = append(s.spans, ss.Spans...)
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// submitOne runs "enqueue submit" with one speech spec, vars as its
// environment, and returns the job message it published.
func submitOne(t *testing.T, id string, vars map[string]string) *nats.Msg {
	t.Helper()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	vars["SLUICE_NATS_URL"] = n.URL
	var stdout, stderr bytes.Buffer
	env := Env{
		Stdin:      strings.NewReader(`{"id":"` + id + `","kind":"speech","speech":{"model":"m","input":{"text":"t","voice":"v"}}}`),
		Stdout:     &stdout,
		Stderr:     &stderr,
		Getenv:     func(k string) string { return vars[k] },
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now,
		Rand:       strings.NewReader(""),
	}
	if code := Run(ctx, []string{"submit", "-f", "-"}, env); code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	s, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetLastMsgForSubject(ctx, contract.JobSubject("speech"))
	if err != nil {
		t.Fatal(err)
	}
	return &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
}

// TestSubmitTracesThePublish: with an OTLP endpoint set, submit sends a
// producer span, service sluice-enqueue, in the trace TRACEPARENT names,
// and the job message's traceparent names that span.
func TestSubmitTracesThePublish(t *testing.T) {
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	endpoint := srv.URL + "/v1/traces"
	// The exporter reads its endpoint from the process's environment;
	// enqueue decides from its own whether to trace.
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	msg := submitOne(t, "traced-1", map[string]string{
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
		"TRACEPARENT":                        "00-" + parentTrace + "-" + parentSpan + "-01",
	})

	// Run returns after the spans are flushed.
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var send *tracepb.Span
	for _, s := range sink.spans {
		if s.Name == "send sluice.jobs.speech" {
			send = s
		}
	}
	if send == nil {
		t.Fatalf("no send span among %d", len(sink.spans))
	}
	if send.Kind != tracepb.Span_SPAN_KIND_PRODUCER {
		t.Errorf("send span kind = %v", send.Kind)
	}
	if len(sink.services) == 0 || sink.services[0] != "sluice-enqueue" {
		t.Errorf("service names = %v", sink.services)
	}
	attrs := map[string]string{}
	for _, a := range send.Attributes {
		attrs[a.Key] = a.Value.GetStringValue()
	}
	for k, v := range map[string]string{"messaging.system": "nats", "messaging.operation.type": "send",
		"messaging.destination.name": "sluice.jobs.speech", "messaging.message.id": "traced-1"} {
		if attrs[k] != v {
			t.Errorf("send span %s = %q, want %q", k, attrs[k], v)
		}
	}
	if got := hex.EncodeToString(send.TraceId); got != parentTrace {
		t.Errorf("send span trace = %s, want TRACEPARENT's %s", got, parentTrace)
	}
	if got := hex.EncodeToString(send.ParentSpanId); got != parentSpan {
		t.Errorf("send span parent = %s, want TRACEPARENT's %s", got, parentSpan)
	}
	want := "00-" + parentTrace + "-" + hex.EncodeToString(send.SpanId) + "-01"
	if got := msg.Header.Get("traceparent"); got != want {
		t.Errorf("job message traceparent = %q, want %q", got, want)
	}
}

// TestSubmitWithoutTracingSetsNoHeader: with no OTLP endpoint, the job
// message carries no trace context, even with TRACEPARENT set.
func TestSubmitWithoutTracingSetsNoHeader(t *testing.T) {
	t.Parallel()
	msg := submitOne(t, "plain-1", map[string]string{
		"TRACEPARENT": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	})
	for k := range msg.Header {
		if strings.EqualFold(k, "traceparent") || strings.EqualFold(k, "tracestate") {
			t.Errorf("job message has header %s: %v", k, msg.Header[k])
		}
	}
	if msg.Header.Get(contract.HeaderMsgID) != "plain-1" {
		t.Errorf("headers = %v", msg.Header)
	}
}

// TestRetryTracesThePublish: with an OTLP endpoint set, enqueue retry
// sends a producer span for the retry's publish, in the trace TRACEPARENT
// names, and the retry's message carries its traceparent.
func TestRetryTracesThePublish(t *testing.T) {
	sink := &otlpSink{}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	endpoint := srv.URL + "/v1/traces"
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", endpoint)
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := state.NewStore(kv, "w", time.Now).UpdateNew(ctx, "clip-1", func(r *state.Record) error {
		*r = state.Record{JobID: "clip-1", Kind: "speech", Status: state.StatusFailed, Error: &state.Error{Code: "upstream_failed"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	specs, err := n.JS.KeyValue(ctx, contract.SpecsBucket)
	if err != nil {
		t.Fatal(err)
	}
	spec := `{"id":"clip-1","kind":"speech","speech":{"model":"m","input":{"text":"t","voice":"v"}}}`
	if err := state.NewSpecs(specs).Keep(ctx, "clip-1", []byte(spec)); err != nil {
		t.Fatal(err)
	}
	const parentTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	vars := map[string]string{"SLUICE_NATS_URL": n.URL, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
		"TRACEPARENT": "00-" + parentTrace + "-00f067aa0ba902b7-01"}
	var stdout, stderr bytes.Buffer
	env := Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) string { return vars[k] },
		IsTerminal: func(io.Writer) bool { return false }, Now: time.Now, Rand: strings.NewReader("")}
	if code := Run(ctx, []string{"retry", "clip-1"}, env); code != ExitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}

	sink.mu.Lock()
	defer sink.mu.Unlock()
	var send *tracepb.Span
	for _, s := range sink.spans {
		if s.Name == "send sluice.jobs.speech" {
			send = s
		}
	}
	if send == nil || hex.EncodeToString(send.TraceId) != parentTrace {
		t.Fatalf("no send span in TRACEPARENT's trace among %v", sink.spans)
	}
	s, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := s.GetLastMsgForSubject(ctx, contract.JobSubject("speech"))
	if err != nil {
		t.Fatal(err)
	}
	want := "00-" + parentTrace + "-" + hex.EncodeToString(send.SpanId) + "-01"
	if got := raw.Header.Get("traceparent"); raw.Header.Get(contract.HeaderMsgID) != "clip-1-r1" || got != want {
		t.Errorf("retry message %s: traceparent %q, want %q", raw.Header.Get(contract.HeaderMsgID), got, want)
	}
}
