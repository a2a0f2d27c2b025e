package runner

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names the runner's spans' instrumentation scope.
const tracerName = "github.com/sluice-dev/sluice/internal/runner"

// startSpan starts a span of j's run under the delivery's process span
// that ctx holds (the consumer starts it). With the no-op provider it
// costs a call returning ctx's non-recording span.
func (r *Runner) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return r.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// endSpan ends span, marking it failed with err (nil: succeeded).
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// endWait ends a wait span with the number of polls it saw: a job waits
// hours, so one span stands for the whole wait rather than one per poll.
func endWait(span trace.Span, polls int, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("sluice.polls", polls))
	}
	endSpan(span, err)
}
