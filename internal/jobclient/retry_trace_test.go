package jobclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestRetryTracesThePublish: with a tracer, Retry puts a producer span
// around the retry's publish, a child of the context's span, and the
// retry's message carries its traceparent; without one, no span and no
// header.
func TestRetryTracesThePublish(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	failJob(ctx, t, n, "clip-1")
	failJob(ctx, t, n, "clip-2")
	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	pctx, parent := tp.Tracer("test").Start(ctx, "pipeline")
	res, err := jc.Retry(pctx, "clip-1", jobclient.RetryOptions{Tracer: tp, Propagator: propagation.TraceContext{}})
	parent.End()
	if err != nil || res.RetryID != "clip-1-r1" {
		t.Fatalf("Retry = %+v, %v", res, err)
	}
	var send *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "send sluice.jobs.video" {
			send = &s
		}
	}
	if send == nil {
		t.Fatalf("no send span among %v", exp.GetSpans().Snapshots())
	}
	if send.SpanKind != trace.SpanKindProducer || send.Parent.SpanID() != parent.SpanContext().SpanID() ||
		send.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("send span: kind %v, parent %v; want a producer span, a child of %v", send.SpanKind, send.Parent, parent.SpanContext())
	}
	attrs := map[string]string{}
	for _, a := range send.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["messaging.message.id"] != "clip-1-r1" || attrs["messaging.system"] != "nats" {
		t.Errorf("send span attributes = %v", attrs)
	}
	want := "00-" + send.SpanContext.TraceID().String() + "-" + send.SpanContext.SpanID().String() + "-01"
	if got := lastJob(ctx, t, n).Get("traceparent"); got != want {
		t.Errorf("retry message traceparent = %q, want %q", got, want)
	}

	exp.Reset()
	if _, err := jc.Retry(pctx, "clip-2", jobclient.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := lastJob(ctx, t, n).Get("traceparent"); got != "" || len(exp.GetSpans()) != 0 {
		t.Errorf("untraced retry: traceparent %q, %d spans", got, len(exp.GetSpans()))
	}
}

// failJob records job id as a video job that failed, with its spec kept,
// as a worker leaves one.
func failJob(ctx context.Context, t *testing.T, n *testenv.NATS, id string) {
	t.Helper()
	spec := `{"id":"` + id + `","kind":"video","video":{"model":"m","input":{"prompt":"p"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`
	endJob(ctx, t, n, id, "", "upstream_failed", []byte(spec))
}

// lastJob returns the headers of the last video job message published.
func lastJob(ctx context.Context, t *testing.T, n *testenv.NATS) nats.Header {
	t.Helper()
	s, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, contract.JobSubject("video"))
	if err != nil {
		t.Fatal(err)
	}
	return m.Header
}
