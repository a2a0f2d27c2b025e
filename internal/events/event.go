// Package events builds sluice's CloudEvents (docs/events.md) from a
// job's state record and publishes them to SLUICE_EVENTS, deduplicated by
// their id.
package events

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// Source is the CloudEvents source of every event the worker publishes.
const Source = "sluice/worker"

// TimeFormat is the layout of an event's time: RFC 3339, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Event is one CloudEvent in JSON structured mode.
type Event struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Subject         string `json:"subject"`
	Time            string `json:"time"`
	DataContentType string `json:"datacontenttype"`
	Data            Data   `json:"data"`
}

// Data is an event's data object.
type Data struct {
	JobID     string            `json:"job_id"`
	Kind      string            `json:"kind"`
	Status    string            `json:"status"`
	Tenant    string            `json:"tenant"`
	Priority  int               `json:"priority"`
	Labels    map[string]string `json:"labels"`
	Attempt   int               `json:"attempt"`
	Upstream  *state.Upstream   `json:"upstream"`
	Artifacts []state.Artifact  `json:"artifacts"`
	Usage     json.RawMessage   `json:"usage"`
	Error     *state.Error      `json:"error"`
	// Cost is the job's cost in credits, on a terminal event when the
	// price table covers the job (docs/tenants.md).
	Cost *float64 `json:"cost,omitempty"`
	// Steps are a pipeline's steps with their statuses and artifacts
	// (docs/pipelines.md); absent for the other kinds.
	Steps []state.PipelineStep `json:"steps,omitempty"`
	// Note qualifies a terminal status (docs/events.md), e.g.
	// "submit_may_have_happened" on a cancelled media job.
	Note string `json:"note,omitempty"`
}

// Defaults of a record without its spec's tenant and priority.
const (
	defaultTenant   = "default"
	defaultPriority = 3
)

// FromRecord builds the event of rec with the given status at time t. The
// upstream object is null until the job has an upstream id; usage is null
// when upstream sent none.
func FromRecord(rec *state.Record, status state.Status, t time.Time) Event {
	d := Data{
		JobID:     rec.JobID,
		Kind:      rec.Kind,
		Status:    string(status),
		Tenant:    cmp.Or(rec.Tenant, defaultTenant),
		Priority:  cmp.Or(rec.Priority, defaultPriority),
		Labels:    rec.Labels,
		Attempt:   max(rec.Attempts, 1),
		Artifacts: rec.Artifacts,
		Usage:     rec.Usage,
	}
	if d.Labels == nil {
		d.Labels = map[string]string{}
	}
	if rec.Pipeline != nil {
		d.Steps = rec.Pipeline.Steps
	}
	if d.Artifacts == nil {
		d.Artifacts = []state.Artifact{}
	}
	if len(d.Usage) == 0 || string(d.Usage) == "null" {
		d.Usage = json.RawMessage("null")
	}
	// JobName is the record's note of the name a lost submit is looked
	// for by, not one of the event's upstream fields (docs/events.md).
	u := rec.Upstream
	u.JobName = ""
	if u != (state.Upstream{}) {
		d.Upstream = &u
	}
	if status == state.StatusFailed {
		d.Error = rec.Error
	}
	if status.Terminal() {
		d.Cost = rec.Cost
		d.Note = rec.Note
	}
	return Event{
		SpecVersion:     "1.0",
		ID:              contract.EventID(rec.JobID, string(status)),
		Source:          Source,
		Type:            "sluice.job." + string(status),
		Subject:         rec.JobID,
		Time:            t.UTC().Format(TimeFormat),
		DataContentType: "application/json",
		Data:            d,
	}
}

// Publisher publishes events to SLUICE_EVENTS.
type Publisher struct {
	js         jetstream.JetStream
	worker     string
	ackTimeout time.Duration
	// tracer and prop put a span around each publish and its trace
	// context in the event's headers (WithTracing).
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher { return &Publisher{js: js} }

// WithWorker returns a Publisher that names worker in the Sluice-Worker
// header of every event it publishes, for the operator's timeline.
func (p *Publisher) WithWorker(worker string) *Publisher {
	c := *p
	c.worker = worker
	return &c
}

// WithTracing returns a Publisher that puts a producer span, a child of
// the job's span in the publish's context, around each publish and writes
// its trace context in the event's headers (traceparent, tracestate), so a
// subscriber can continue the trace. Without it, events carry none.
func (p *Publisher) WithTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) *Publisher {
	c := *p
	c.tracer, c.prop = tp.Tracer("github.com/sluice-dev/sluice/internal/events"), prop
	return &c
}

// Publish encodes ev and publishes it; see PublishRaw.
func (p *Publisher) Publish(ctx context.Context, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	return p.PublishRaw(ctx, ev.Data.Kind, ev.Data.Status, ev.ID, b)
}

// PublishAsync publishes ev like Publish but does not wait for the
// stream's acknowledgement, for progress events (submitted, running), which
// are best effort: events published later on the same connection are still
// stored after it. It fails only when the event cannot be encoded or sent;
// a failure reported by the server later goes to the JetStream context's
// asynchronous error handler (jetstream.WithPublishAsyncErrHandler).
func (p *Publisher) PublishAsync(ctx context.Context, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	msg := p.newMsg(ev.Data.Kind, ev.Data.Status, ev.ID, b)
	_, span := p.startPublish(ctx, msg)
	_, err = p.js.PublishMsgAsync(msg)
	endPublish(span, err)
	if err != nil {
		return fmt.Errorf("publish event %s: %w", ev.ID, err)
	}
	return nil
}

// PublishRaw publishes an encoded event to sluice.events.<kind>.<status>
// with Nats-Msg-Id = id and waits for the stream's ack. A second publish of
// the same id inside the duplicate window is acknowledged and dropped by
// the server.
//
// A publish whose ack does not come (lost with a connection or a stream
// leader) may have been stored: it is sent again, with the same id, for up
// to RepublishFor, each try waiting AckTimeout; the stream stores it once
// and acknowledges the repeat as a duplicate.
func (p *Publisher) PublishRaw(ctx context.Context, kind, status, id string, body []byte) error {
	msg := p.newMsg(kind, status, id, body)
	ctx, span := p.startPublish(ctx, msg)
	retry := backoff.Retry{Spacing: backoff.Exponential{Min: 50 * time.Millisecond, Max: 2 * time.Second}, Jitter: backoff.JitterNone}
	var first time.Time
	err := retry.Do(ctx, func(ctx context.Context, attempt int) error {
		actx, cancel := context.WithTimeout(ctx, cmp.Or(p.ackTimeout, AckTimeout))
		_, err := natsconn.Publish(actx, p.js.Conn(), msg)
		cancel()
		if attempt == 0 {
			first = time.Now()
		}
		if err != nil && (!natsconn.Ambiguous(ctx, err) || time.Since(first) >= RepublishFor) {
			return backoff.Permanent(err)
		}
		return err
	})
	endPublish(span, err)
	if err != nil {
		return fmt.Errorf("publish event %s: %w", id, err)
	}
	return nil
}

// startPublish starts the publish span of msg and writes its context into
// msg's headers; without WithTracing, or outside a traced job, it does
// nothing.
func (p *Publisher) startPublish(ctx context.Context, msg *nats.Msg) (context.Context, trace.Span) {
	if p.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	ctx, span := p.tracer.Start(ctx, "publish "+msg.Subject, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(semconv.MessagingSystemKey.String("nats"), semconv.MessagingOperationTypeSend,
			semconv.MessagingDestinationName(msg.Subject), semconv.MessagingMessageID(msg.Header.Get(contract.HeaderMsgID))))
	tracing.Inject(ctx, p.prop, msg.Header)
	return ctx, span
}

func endPublish(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// AckTimeout is how long PublishRaw waits for the stream's ack to one try
// (the JetStream client's default), RepublishFor how long it goes on
// sending an event whose ack was lost.
const (
	AckTimeout   = 5 * time.Second
	RepublishFor = 30 * time.Second
)

// WithAckTimeout returns a Publisher whose tries wait d for their ack.
func (p *Publisher) WithAckTimeout(d time.Duration) *Publisher {
	c := *p
	c.ackTimeout = d
	return &c
}

// newMsg is the message of an encoded event.
func (p *Publisher) newMsg(kind, status, id string, body []byte) *nats.Msg {
	msg := nats.NewMsg(contract.EventSubject(kind, status))
	msg.Data = body
	msg.Header.Set(contract.HeaderMsgID, id)
	msg.Header.Set("Content-Type", contract.CloudEventsContentType)
	if p.worker != "" {
		msg.Header.Set(contract.HeaderWorker, p.worker)
	}
	return msg
}
