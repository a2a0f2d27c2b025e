package cli

import (
	"context"
	"fmt"

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

// startRerunTracing is startTracing for retry and dlq replay: the
// retries' publishes are traced as submit's are, each a producer span
// whose traceparent the retry's message carries.
func (a *app) startRerunTracing(ctx context.Context, force, asTenant bool) (context.Context, *tracing.Tracing, jobclient.RetryOptions, error) {
	ctx, tr, po, err := a.startTracing(ctx, jobclient.PublishOptions{})
	return ctx, tr, jobclient.RetryOptions{Force: force, AsTenant: asTenant, Tracer: po.Tracer, Propagator: po.Propagator}, err
}

// stopTracing exports the spans still queued; a failure to is reported and
// changes nothing else: the jobs are published.
func (a *app) stopTracing(ctx context.Context, tr *tracing.Tracing) {
	if err := tr.Shutdown(ctx); err != nil {
		fmt.Fprintf(a.env.Stderr, "enqueue: traces not exported: %v\n", err)
	}
}
