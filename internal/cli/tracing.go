package cli

import (
	"context"

	"go.opentelemetry.io/otel/propagation"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// startTracing sets up the traces of a publish from the OTEL_* variables
// (docs/configuration.md, "Traces"): with an endpoint, the returned
// options put a producer span around each publish and its traceparent in
// the job message, and ctx continues the trace named by TRACEPARENT (and
// TRACESTATE) when the environment carries one, as a script run inside a
// traced pipeline does. Without one, the options are o as given and the
// messages carry no trace header. Call the returned Tracing's Shutdown to
// flush the spans.
func (a *app) startTracing(ctx context.Context, o jobclient.PublishOptions) (context.Context, *tracing.Tracing, jobclient.PublishOptions, error) {
	cfg, err := tracing.FromEnv(a.env.Getenv)
	if err != nil {
		return ctx, nil, o, usageErrorf("%v", err)
	}
	tr, err := tracing.Start(ctx, cfg, tracing.ServiceEnqueue, nil)
	if err != nil {
		return ctx, nil, o, usageErrorf("%v", err)
	}
	if !cfg.On() {
		return ctx, tr, o, nil
	}
	if tp := a.env.Getenv("TRACEPARENT"); tp != "" {
		ctx = tr.Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": tp, "tracestate": a.env.Getenv("TRACESTATE")})
	}
	o.Tracer, o.Propagator = tr.Provider, tr.Propagator
	return ctx, tr, o, nil
}
