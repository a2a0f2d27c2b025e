package jobclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// PublishOptions tunes Publish.
type PublishOptions struct {
	// MaxInFlight bounds the publishes sent but not yet acknowledged.
	// Defaults to 256.
	MaxInFlight int
	// AckTimeout bounds the wait for one publish's acknowledgement.
	// Defaults to 30s.
	AckTimeout time.Duration
	// OnResult is called once per submission, in submission order and
	// from one goroutine, when its publish is settled. Defaults to none.
	OnResult func(Published)
	// Tracer, when set, puts a producer span around each publish, from
	// its send to its acknowledgement, a child of the context's span, and
	// Propagator writes its traceparent into the message's headers, which
	// the worker links its job's trace to. Defaults to none: no span and
	// no header.
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
}

func (o PublishOptions) withDefaults() PublishOptions {
	o.MaxInFlight = cmp.Or(o.MaxInFlight, 256)
	o.AckTimeout = cmp.Or(o.AckTimeout, 30*time.Second)
	return o
}

func (o PublishOptions) validate() error {
	if o.MaxInFlight < 1 {
		return fmt.Errorf("MaxInFlight must be at least 1, got %d", o.MaxInFlight)
	}
	if o.AckTimeout <= 0 {
		return fmt.Errorf("AckTimeout must be positive, got %s", o.AckTimeout)
	}
	return nil
}

// publishRetries is how many more times a publish whose acknowledgement
// was lost is sent. The copies carry the same Nats-Msg-Id, so the stream
// keeps at most one of them.
const publishRetries = 2

// Published is the outcome of publishing one submission.
type Published struct {
	// ID, Kind and Line are the submission's.
	ID   string
	Kind jobspec.Kind
	Line int
	// Duplicate reports that the stream already had a message with this
	// id inside its duplicate window, so nothing new was queued.
	Duplicate bool
	// Sequence is the message's sequence in SLUICE_JOBS (that of the
	// original for a duplicate).
	Sequence uint64
	// Err is set when the publish was not acknowledged.
	Err error
}

// PublishResult sums up a Publish.
type PublishResult struct {
	// Jobs holds one entry per submission, in submission order, up to the
	// first one not sent when the context ended.
	Jobs []Published
	// Published counts the new messages, Duplicates the ones the stream
	// already had, Failed the ones not acknowledged.
	Published, Duplicates, Failed int
}

// Publish makes sure SLUICE_JOBS exists, then publishes every submission
// to sluice.jobs.<kind> (its tenant's subject when it has a Tenant, or
// when its spec names a bound tenant: see BoundTenants) with Nats-Msg-Id
// set to its id, keeping at most
// MaxInFlight publishes unacknowledged. A publish whose acknowledgement is
// lost is sent again with the same id, which the stream deduplicates.
//
// The error is for the set-up (no stream, no JetStream) or the context
// ending before every submission was sent; failed publishes are counted
// in the result instead.
func (c *Client) Publish(ctx context.Context, subs []Submission, o PublishOptions) (*PublishResult, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := c.ensureJobsStream(ctx); err != nil {
		return nil, err
	}
	c.BoundTenants(ctx, subs)
	js, err := jetstream.New(c.nc,
		jetstream.WithPublishAsyncMaxPending(o.MaxInFlight),
		jetstream.WithPublishAsyncTimeout(o.AckTimeout),
	)
	if err != nil {
		return nil, err
	}

	type inFlight struct {
		sub  *Submission
		msg  *nats.Msg
		span trace.Span
		f    jetstream.PubAckFuture
		err  error
		// ctx ends when the server refuses this user the message's
		// subject (a tenant subject it may not act for): at once, not
		// after the acknowledgement's timeout and its retries.
		ctx context.Context
	}
	refusable := refusableSubjects{c: c, ctx: ctx}
	defer refusable.stop()
	// The library bounds what is unacknowledged; the channel only hands
	// the futures over in order.
	pending := make(chan inFlight, o.MaxInFlight)
	res := &PublishResult{Jobs: make([]Published, 0, len(subs))}
	settled := make(chan struct{})
	full := &jobsFull{}
	go func() {
		defer close(settled)
		for p := range pending {
			r := c.settle(p.ctx, js, o, p.sub, p.msg, p.f, p.err)
			if natsconn.NoSpace(r.Err) {
				r.Err = full.explain(ctx, js, r.Err)
			}
			endSend(p.span, r)
			res.add(r)
			if o.OnResult != nil {
				o.OnResult(r)
			}
		}
	}()

	var stopped error
	for i := range subs {
		if err := ctx.Err(); err != nil {
			stopped = fmt.Errorf("publish stopped after %d of %d specs: %w", i, len(subs), context.Cause(ctx))
			break
		}
		msg := subs[i].message()
		span := startSend(ctx, o, msg)
		// A full window waits for a free slot for up to AckTimeout.
		f, err := js.PublishMsgAsync(msg, jetstream.WithStallWait(o.AckTimeout))
		pending <- inFlight{sub: &subs[i], msg: msg, span: span, f: f, err: err, ctx: refusable.of(msg.Subject)}
	}
	close(pending)
	<-settled
	c.markScheduler(ctx, subs)
	return res, stopped
}

// refusableSubjects holds one refusable context per subject published
// on (see Client.refusable).
type refusableSubjects struct {
	c     *Client
	ctx   context.Context
	ctxs  map[string]context.Context
	stops []func()
}

func (r *refusableSubjects) of(subject string) context.Context {
	if ctx, ok := r.ctxs[subject]; ok {
		return ctx
	}
	if r.ctxs == nil {
		r.ctxs = map[string]context.Context{}
	}
	ctx, stop := r.c.refusable(r.ctx, subject)
	r.ctxs[subject], r.stops = ctx, append(r.stops, stop)
	return ctx
}

func (r *refusableSubjects) stop() {
	for _, stop := range r.stops {
		stop()
	}
}

// jobsFull explains the publishes SLUICE_JOBS refused for lack of space,
// reading the reached limits once.
type jobsFull struct {
	looked bool
	limits []natsconn.Limit
}

// explain returns a *JobsFullError for err.
func (f *jobsFull) explain(ctx context.Context, js jetstream.JetStream, err error) error {
	if !f.looked {
		f.looked = true
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		f.limits, _ = natsconn.ReachedLimits(lctx, js, contract.JobsStream)
		cancel()
	}
	return &JobsFullError{Limits: f.limits, Err: err}
}

func (r *PublishResult) add(p Published) {
	r.Jobs = append(r.Jobs, p)
	switch {
	case p.Err != nil:
		r.Failed++
	case p.Duplicate:
		r.Duplicates++
	default:
		r.Published++
	}
}

// message builds the NATS message of a submission.
func (s *Submission) message() *nats.Msg {
	subject := contract.JobSubject(string(s.Kind))
	if s.Tenant != "" {
		subject = contract.TenantSubject(string(s.Kind), s.Tenant)
	}
	m := nats.NewMsg(subject)
	m.Data = s.Data
	m.Header.Set(contract.HeaderMsgID, s.ID)
	m.Header.Set("Content-Type", "application/json")
	return m
}

// startSend starts the producer span of msg's publish and writes its
// traceparent into msg's headers; without o.Tracer it returns the no-op
// span and leaves msg as it is.
func startSend(ctx context.Context, o PublishOptions, msg *nats.Msg) trace.Span {
	if o.Tracer == nil {
		return trace.SpanFromContext(context.Background())
	}
	ctx, span := o.Tracer.Tracer("github.com/sluice-dev/sluice/internal/jobclient").Start(ctx, "send "+msg.Subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(semconv.MessagingSystemKey.String("nats"), semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"), semconv.MessagingDestinationName(msg.Subject),
			semconv.MessagingMessageID(msg.Header.Get(contract.HeaderMsgID))))
	tracing.Inject(ctx, o.Propagator, msg.Header)
	return span
}

// endSend ends a publish's span with its outcome.
func endSend(span trace.Span, r Published) {
	if r.Err != nil {
		span.SetStatus(codes.Error, r.Err.Error())
	} else if r.Duplicate {
		span.SetAttributes(attribute.Bool("sluice.duplicate", true))
	}
	span.End()
}

// settle waits for the acknowledgement of one asynchronous publish (sendErr
// when it could not even be sent) and resends it synchronously when the
// acknowledgement was lost rather than refused.
func (c *Client) settle(ctx context.Context, js jetstream.JetStream, o PublishOptions, sub *Submission, msg *nats.Msg, f jetstream.PubAckFuture, sendErr error) Published {
	out := Published{ID: sub.ID, Kind: sub.Kind, Line: sub.Line}
	err := sendErr
	if err == nil {
		select {
		case ack := <-f.Ok():
			out.Duplicate, out.Sequence = ack.Duplicate, ack.Sequence
			return out
		case err = <-f.Err():
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
	}
	for range publishRetries {
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) || ctx.Err() != nil {
			break // the server refused it, or the user gave up
		}
		actx, cancel := context.WithTimeout(ctx, o.AckTimeout)
		ack, rerr := js.PublishMsg(actx, msg)
		cancel()
		if rerr == nil {
			// A duplicate here is most likely the first attempt, stored
			// with its acknowledgement lost: it counts as published.
			out.Sequence = ack.Sequence
			return out
		}
		err = rerr
	}
	out.Err = fmt.Errorf("publish %s: %w", sub.ID, err)
	return out
}
