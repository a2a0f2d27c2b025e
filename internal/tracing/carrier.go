package tracing

import (
	"context"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Header is a propagation carrier over NATS headers. NATS keeps a key as
// its sender spelled it ("traceparent" from most producers, "Traceparent"
// from one that went through http.Header), so Get matches keys in any
// case; propagation.HeaderCarrier would look for the canonical spelling
// only. Set writes the key as given: the W3C names, in lower case.
type Header nats.Header

var _ propagation.TextMapCarrier = Header(nil)

// Get returns the first value of key, matched in any case.
func (h Header) Get(key string) string {
	if v, ok := h[key]; ok && len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces every value of key, in any case, with value.
func (h Header) Set(key, value string) {
	for k := range h {
		if strings.EqualFold(k, key) {
			delete(h, k)
		}
	}
	h[key] = []string{value}
}

// Keys lists the keys present.
func (h Header) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// Producer is the span context a job message carries in its headers (its
// traceparent), or an invalid one when it carries none. A malformed
// traceparent is logged at debug and ignored: the job starts a new trace
// and runs as it would without one.
func Producer(prop propagation.TextMapPropagator, h nats.Header, log *zerolog.Logger) trace.SpanContext {
	sc := trace.SpanContextFromContext(prop.Extract(context.Background(), Header(h)))
	if !sc.IsValid() {
		if v := Header(h).Get("traceparent"); v != "" && log != nil {
			log.Debug().Str("traceparent", v).Msg("malformed traceparent ignored; the job starts a new trace")
		}
	}
	return sc
}

// LinkTo is the start option that links a job's span to its producer's
// context. A consumer that may run long after the publish (a queued job, a
// retry hours later, a redelivery after a crash) links to the producer's
// span instead of becoming its child, as the messaging conventions
// advise: its trace is its own, and the link leads back to the publish.
func LinkTo(producer trace.SpanContext) trace.SpanStartOption {
	if !producer.IsValid() {
		return trace.WithLinks()
	}
	return trace.WithLinks(trace.Link{SpanContext: producer, Attributes: []attribute.KeyValue{
		attribute.String("sluice.link", "producer"),
	}})
}

// Inject writes the trace context of ctx into h (nothing when ctx holds
// no recording span).
func Inject(ctx context.Context, prop propagation.TextMapPropagator, h nats.Header) {
	if prop == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	prop.Inject(ctx, Header(h))
}

// Transport returns base with a client span around each request made
// inside a traced job (its context holds a valid span), the trace context
// sent in its headers; other requests (the media poller's batch queries,
// which serve many jobs at once) go through base untouched. With the no-op
// provider it is base itself.
func Transport(tp trace.TracerProvider, prop propagation.TextMapPropagator, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	if tp == nil {
		return base
	}
	if _, off := tp.(noop.TracerProvider); off {
		return base
	}
	traced := otelhttp.NewTransport(base, otelhttp.WithTracerProvider(tp), otelhttp.WithPropagators(prop))
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if !trace.SpanContextFromContext(req.Context()).IsValid() {
			return base.RoundTrip(req)
		}
		return traced.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
