// Package tracing sets up OpenTelemetry traces for the worker and enqueue:
// the tracer provider (the no-op one unless an OTLP endpoint is set), the
// W3C trace-context propagator, a carrier for NATS headers that reads keys
// in any case, the link from a job message to its producer's context, and
// the HTTP transport that puts a span around each upstream request made
// inside a job. The packages below take a trace.TracerProvider and a
// propagator through their config structs and never learn of exporters.
package tracing

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Service names of sluice's processes (the resource's service.name unless
// OTEL_SERVICE_NAME says otherwise).
const (
	ServiceWorker  = "sluice-worker"
	ServiceEnqueue = "sluice-enqueue"
)

// Config is what a process reads of the OTEL_* variables (internal/config
// reads them); the OTLP exporter and the SDK read the others themselves
// (docs/configuration.md, "Traces").
type Config struct {
	// Endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
	// OTEL_EXPORTER_OTLP_ENDPOINT: traces are exported only when it is
	// set. Defaults to "" (off).
	Endpoint string
	// Exporter is OTEL_TRACES_EXPORTER: "otlp" or "none" (off). Defaults
	// to "otlp".
	Exporter string
	// Protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
	// OTEL_EXPORTER_OTLP_PROTOCOL: only "http/protobuf" is built in.
	// Defaults to "http/protobuf".
	Protocol string
	// Disabled is OTEL_SDK_DISABLED=true. Defaults to false.
	Disabled bool
	// MaxQueueSize is OTEL_BSP_MAX_QUEUE_SIZE: the spans ended and not
	// exported yet that are kept; past it a span is dropped and counted.
	// Defaults to 2048.
	MaxQueueSize int
}

// Protocol and exporter values.
const (
	ProtocolHTTP = "http/protobuf"
	ExporterOTLP = "otlp"
	ExporterNone = "none"
)

// On reports whether c exports traces.
func (c Config) On() bool {
	return c.Endpoint != "" && !c.Disabled && cmp.Or(c.Exporter, ExporterOTLP) != ExporterNone
}

// Validate names the variable of every value sluice cannot honour.
func (c Config) Validate() error {
	switch {
	case cmp.Or(c.Protocol, ProtocolHTTP) != ProtocolHTTP:
		return fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not supported (want %s)", c.Protocol, ProtocolHTTP)
	case c.Exporter != "" && c.Exporter != ExporterOTLP && c.Exporter != ExporterNone:
		return fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported (want %s or %s)", c.Exporter, ExporterOTLP, ExporterNone)
	case c.MaxQueueSize < 0:
		return fmt.Errorf("OTEL_BSP_MAX_QUEUE_SIZE: must be positive, not %d", c.MaxQueueSize)
	}
	return nil
}

// Tracing is a process's tracer provider and propagator.
type Tracing struct {
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	sdk        *sdktrace.TracerProvider
}

// Off is tracing turned off: the no-op provider, which costs a nil check
// per span, and the propagator, which still reads a producer's context
// (a job's link needs none when nothing records it) but injects nothing
// from a non-recording span.
func Off() *Tracing {
	return &Tracing{Provider: noop.NewTracerProvider(), Propagator: Propagator()}
}

// Propagator is the W3C trace-context propagator.
func Propagator() propagation.TextMapPropagator { return propagation.TraceContext{} }

// Start returns the tracing of service: Off unless cfg.On. Spans are
// batched and exported over OTLP/HTTP from a goroutine of their own,
// never on a job's path; dropped(n) counts spans lost to a full queue or
// a failed export. Call Shutdown to flush.
func Start(ctx context.Context, cfg Config, service string, dropped func(reason string, n int)) (*Tracing, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.On() {
		return Off(), nil
	}
	if dropped == nil {
		dropped = func(string, int) {}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	queue := cmp.Or(cfg.MaxQueueSize, 2048)
	q := &boundedQueue{max: int64(queue), dropped: dropped}
	q.exporter = countingExporter{SpanExporter: exp, q: q}
	q.SpanProcessor = sdktrace.NewBatchSpanProcessor(q.exporter, sdktrace.WithMaxQueueSize(queue))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(q))
	return &Tracing{Provider: tp, Propagator: Propagator(), sdk: tp}, nil
}

// Shutdown exports the spans still queued, for at most 5s: an unreachable
// endpoint must not hold a stopping process.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil || t.sdk == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return t.sdk.Shutdown(ctx)
}

// boundedQueue counts the spans ended and not yet through the exporter,
// and drops (and counts) a span past max instead of handing it to the
// batch processor, which would drop it without telling: so every span
// lost is counted, and a job never waits for a span.
type boundedQueue struct {
	sdktrace.SpanProcessor
	exporter sdktrace.SpanExporter
	max      int64
	pending  atomic.Int64
	dropped  func(reason string, n int)
}

func (q *boundedQueue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if q.pending.Add(1) > q.max {
		q.pending.Add(-1)
		q.dropped("queue_full", 1)
		return
	}
	q.SpanProcessor.OnEnd(s)
}

// countingExporter tells its queue of every batch through the exporter,
// and counts a failed batch's spans as dropped.
type countingExporter struct {
	sdktrace.SpanExporter
	q *boundedQueue
}

func (e countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.q.pending.Add(-int64(len(spans)))
	if err != nil {
		e.q.dropped("export_failed", len(spans))
	}
	return err
}

// FromEnv reads, through getenv, the OTEL_* variables that decide whether
// and how traces are exported (docs/configuration.md, "Traces"): the
// signal's own variable before the general one, as the OpenTelemetry
// specification says. The worker reads them through internal/config,
// enqueue through its own environment.
func FromEnv(getenv func(string) string) (Config, error) {
	env := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	t := Config{
		Endpoint: env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"),
		Exporter: strings.ToLower(env("OTEL_TRACES_EXPORTER")),
		Protocol: strings.ToLower(env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")),
		Disabled: strings.EqualFold(env("OTEL_SDK_DISABLED"), "true"),
	}
	if v := env("OTEL_BSP_MAX_QUEUE_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return t, fmt.Errorf("OTEL_BSP_MAX_QUEUE_SIZE: want a positive integer, not %q", v)
		}
		t.MaxQueueSize = n
	}
	return t, nil
}
