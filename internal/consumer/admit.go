package consumer

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/order"
)

// Admission (docs/lifecycle.md, "Order of starts"): while the Policy is
// enabled, every worker drains each kind's consumer, sluice-<kind>, into
// the class queues, and starts jobs only from those. A message it admits
// is not held: it is copied to its class and acknowledged within its
// batch, and no job starts from it.

// admitBatch is the most messages one admission pull takes; admitWait how
// long it waits for the first; admitIdle how often a worker whose Policy
// is not enabled asks again.
const (
	admitBatch = 512
	admitWait  = 500 * time.Millisecond
	admitIdle  = time.Second
)

// admitLoop admits kind's messages while the Policy is enabled, until ctx
// ends. A failed batch is retried with Backoff; what it did not
// acknowledge is delivered again, and its copies are deduplicated.
func (c *Consumer) admitLoop(ctx context.Context, kind string) {
	loop := c.cfg.Reach.Loop("admit " + kind)
	var cn jetstream.Consumer
	attempt := 0
	for ctx.Err() == nil {
		if !c.cfg.Policy.Enabled() {
			if backoff.Sleep(ctx, admitIdle) != nil {
				return
			}
			continue
		}
		if cn == nil {
			var err error
			if cn, err = c.bind(ctx, kind, loop); err != nil {
				return
			}
		}
		if err := c.admit(ctx, cn, kind); err != nil {
			if ctx.Err() != nil {
				return
			}
			loop.Fail(err)
			c.log.Debug().Err(err).Str("kind", kind).Msg("admission failed")
			if backoff.Sleep(ctx, c.cfg.Backoff.Delay(attempt)) != nil {
				return
			}
			attempt++
			continue
		}
		loop.OK()
		attempt = 0
	}
}

// admit moves one batch of kind's messages to their class queues: each is
// published asynchronously as it arrives, and acknowledged once its copy
// is stored. The pull waits up to admitWait for more, so the copies are
// settled meanwhile, in order: each one stored wakes kind's fetch loop at
// once (a job published to an idle worker starts then, not at its poll).
func (c *Consumer) admit(ctx context.Context, cn jetstream.Consumer, kind string) error {
	batch, err := cn.Fetch(admitBatch, jetstream.FetchMaxWait(admitWait))
	if err != nil {
		return err
	}
	sent := make(chan admitted, admitBatch)
	settled := make(chan error, 1)
	go func() { settled <- c.settleCopies(ctx, c.classes.of(kind), sent) }()
	var failed error
	for msg := range batch.Messages() {
		f, err := c.cfg.JS.PublishMsgAsync(admission(msg, kind))
		if err != nil {
			failed = err
			_ = msg.Nak()
			continue
		}
		sent <- admitted{msg, f}
	}
	close(sent)
	if err := <-settled; err != nil {
		return err
	}
	if failed != nil {
		return failed
	}
	return batch.Error()
}

// admitted is a message of the intake and its class copy's publish.
type admitted struct {
	msg jetstream.Msg
	ack jetstream.PubAckFuture
}

// settleCopies acknowledges each message of sent once its copy is stored,
// and wakes q's fetch loop; a copy refused Naks its message. Unanswered
// copies leave their messages to AckWait: delivered again, their second
// copies are deduplicated. It returns the first failure, after sent is
// closed and drained, or when no answer came within 10 s of the batch.
func (c *Consumer) settleCopies(ctx context.Context, q *classQueues, sent <-chan admitted) error {
	wctx, cancel := context.WithTimeout(ctx, admitWait+10*time.Second)
	defer cancel()
	var failed error
	for a := range sent {
		select {
		case <-a.ack.Ok():
			q.wake()
			if err := a.msg.Ack(); err != nil {
				failed = err
			}
		case err := <-a.ack.Err():
			failed = err
			_ = a.msg.Nak()
		case <-wctx.Done():
			for range sent { // the batch's remaining messages: left to AckWait
			}
			return wctx.Err()
		}
	}
	return failed
}

// admission is the copy of msg, a message of kind's consumer, for its
// class queue: its data and every header, plus the resolved job id, the
// original publish time, and a Nats-Msg-Id of its own
// (contract.ClassMsgID: the job id's is already in the stream's duplicate
// window; a job id holds no ':'). A
// message on a tenant subject whose tenant is not an id
// (sluice.jobs.video.t.-x: the consumer's filter takes any token) goes to
// kind's class as if published on sluice.jobs.<kind>.
func admission(msg jetstream.Msg, kind string) *nats.Msg {
	meta, _ := msg.Metadata()
	var seq uint64
	var published time.Time
	if meta != nil {
		seq, published = meta.Sequence.Stream, meta.Timestamp
	}
	head := classHead(msg.Data())
	id := jobspec.JobID(head.ID, msg.Headers().Get(contract.HeaderMsgID), seq)
	// A job on a tenant subject waits in its subject's tenant's class,
	// whatever its spec says: the runner refuses a spec naming another.
	tenant := cmp.Or(contract.ArrivedFor(msg.Subject(), nil), head.tenant())
	m := nats.NewMsg(contract.ClassSubject(kind, head.priority(), tenant))
	m.Data = msg.Data()
	for k, v := range msg.Headers() {
		if !publishControl(k) {
			m.Header[k] = v
		}
	}
	// Decided here, before the copy loses the subject it arrived on; it
	// also sets the copy's job id and Nats-Msg-Id.
	contract.MarkArrival(m.Header, msg.Subject(), id)
	if !published.IsZero() {
		m.Header.Set(contract.HeaderPublished, published.UTC().Format(time.RFC3339Nano))
	}
	return m
}

// publishControl reports whether header k tells JetStream how to store
// the message it comes with (Nats-Expected-*, Nats-TTL, Nats-Rollup,
// Nats-Msg-Id, a batch's or a schedule's): said of the intake's message,
// not of its class copy, which they would refuse for ever or expire. The
// Nats- prefix is the server's; sluice's own headers are Sluice-.
func publishControl(k string) bool {
	return len(k) >= 5 && strings.EqualFold(k[:5], "Nats-")
}

// specHead is what admission reads of a spec. A spec it cannot read goes
// to the default class, where the runner fails it as it would any invalid
// spec.
type specHead struct {
	ID       string          `json:"id"`
	Tenant   string          `json:"tenant"`
	Priority json.RawMessage `json:"priority"`
}

func classHead(data []byte) specHead {
	var h specHead
	if json.Unmarshal(data, &h) != nil {
		return specHead{}
	}
	return h
}

func (h specHead) tenant() string {
	if jobspec.ValidID(h.Tenant) {
		return h.Tenant
	}
	return order.DefaultTenant
}

func (h specHead) priority() int {
	p, ok := jobspec.Integer(h.Priority, jobspec.MinPriority, jobspec.MaxPriority)
	if !ok {
		return order.DefaultPriority
	}
	return p
}
