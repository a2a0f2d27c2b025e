package consumer

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// tracerName names the consumer's spans' instrumentation scope.
const tracerName = "github.com/sluice-dev/sluice/internal/consumer"

// startProcess starts d's process span, the root of this delivery's
// spans: a new trace linked to the producer's context the message
// carries, not its child (tracing.LinkTo says why). The span ends once
// the message is settled, which for a detached job is when it ends.
func (c *Consumer) startProcess(ctx context.Context, d *Delivery) context.Context {
	tr := c.cfg.Tracer.Tracer(tracerName)
	producer := tracing.Producer(c.cfg.Propagator, d.Msg.Headers(), &c.log)
	subject := d.Msg.Subject()
	ctx, d.span = tr.Start(ctx, "process "+subject,
		trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer), tracing.LinkTo(producer))
	if d.span.IsRecording() {
		d.span.SetAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingDestinationName(subject),
			semconv.MessagingMessageID(d.Msg.Headers().Get(contract.HeaderMsgID)),
			attribute.String("sluice.kind", d.Kind),
			attribute.Int64("sluice.stream_seq", int64(d.StreamSeq())),
			attribute.Int64("sluice.deliveries", int64(d.NumDelivered())),
			attribute.Bool("sluice.orphaned", d.orphaned),
		)
	}
	return ctx
}

// settleTraced settles d with out inside a settle span, then ends d's
// process span.
func (c *Consumer) settleTraced(ctx context.Context, d *Delivery, out Outcome) {
	span := d.span
	if span == nil || !span.IsRecording() {
		c.settle(ctx, d, out)
		return
	}
	sctx := trace.ContextWithSpan(ctx, span)
	sctx, settle := c.cfg.Tracer.Tracer(tracerName).Start(sctx, out.Action.String()+" "+d.Msg.Subject(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(semconv.MessagingOperationTypeSettle, attribute.String("sluice.action", out.Action.String())))
	c.settle(sctx, d, out)
	settle.End()
	span.SetAttributes(attribute.String("sluice.action", out.Action.String()))
	if out.Action == DeadLetter {
		span.SetStatus(codes.Error, out.Reason)
	}
	span.End()
}
