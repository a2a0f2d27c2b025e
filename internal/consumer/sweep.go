package consumer

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/reach"
)

// SLUICE_JOBS takes every subject under sluice.jobs. (CONTRACT.md section
// 2), but its durable consumers deliver only sluice.jobs.<kind>. A message
// published anywhere else (sluice.jobs.vidoe, sluice.jobs.speech.extra) is
// acknowledged to its producer and then no consumer would ever deliver it.
// The sweep finds such messages by the stream's subject counts (one request
// per sweep, whatever the depth of the queue) and hands each to the Handler
// like a delivery; settling it deletes it from the stream (Ack, Term) or
// leaves it for the next sweep (a retry). The same counts give the jobs
// waiting per kind.

// sweepLoop sweeps SLUICE_JOBS at once and then every SweepInterval (with
// up to 10% jitter, so a fleet does not sweep in step) until ctx ends.
// A failed sweep is reported to Reach (the "sweep" loop says once that it
// waits for JetStream); the interval paces the next attempt.
func (c *Consumer) sweepLoop(ctx, handlerCtx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	loop := c.cfg.Reach.Loop("sweep")
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch err := c.sweep(ctx, handlerCtx); {
		case err == nil:
			loop.OK()
		case ctx.Err() == nil:
			loop.Fail(err)
			c.log.Debug().Err(err).Msg("sweep of " + contract.JobsStream + " failed; trying again later")
		}
		t.Reset(c.cfg.SweepInterval + rand.N(c.cfg.SweepInterval/10+1))
	}
}

// sweep reports the jobs waiting per kind and handles every message on a
// subject that no consumer serves.
func (c *Consumer) sweep(ctx, handlerCtx context.Context) error {
	stream, err := c.cfg.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		return err
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(contract.JobsSubjectPrefix+">"))
	if err != nil {
		return err
	}
	// A member of a group that has lost its leader answers from its own
	// copy: the counts may be stale and the answer proves no reach.
	if err := reach.Quorum(info.Cluster, c.cfg.Reach.StaleAfter()); err != nil {
		return err
	}
	if c.cfg.Observer.Waiting != nil {
		for _, kind := range contract.Kinds {
			c.cfg.Observer.Waiting(kind, int(info.State.Subjects[contract.JobSubject(kind)]))
		}
	}
	for subject, n := range info.State.Subjects {
		if n == 0 || contract.Served(subject) {
			continue
		}
		if err := c.sweepSubject(ctx, handlerCtx, stream, subject, info.State.FirstSeq); err != nil {
			return err
		}
	}
	return nil
}

// sweepSubject hands every message of subject, from sequence from on, to
// the Handler, one at a time.
func (c *Consumer) sweepSubject(ctx, handlerCtx context.Context, stream jetstream.Stream, subject string, from uint64) error {
	for seq := max(from, 1); ctx.Err() == nil; {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		seq = raw.Sequence + 1
		c.handleStray(handlerCtx, stream, raw)
	}
	return nil
}

// handleStray runs the Handler on a message that no consumer delivers. Its
// Delivery's Kind is contract.KindOfMessage's answer; the Handler tells it
// from a real delivery by its subject.
func (c *Consumer) handleStray(ctx context.Context, stream jetstream.Stream, raw *jetstream.RawStreamMsg) {
	kind := contract.KindOfMessage(raw.Subject, raw.Data)
	c.log.Warn().Str("subject", raw.Subject).Uint64("seq", raw.Sequence).Str("kind", kind).
		Msg("job message on a subject no worker serves")
	msg := &strayMsg{raw: raw, stream: stream}
	meta, _ := msg.Metadata()
	d := &Delivery{Kind: kind, Msg: msg, Meta: meta, stopping: c.stopping, c: c}
	if out := c.safeHandle(ctx, d); out.Action != Detach {
		d.Settle(ctx, out)
	}
}

// strayMsg is a message read from SLUICE_JOBS directly rather than
// delivered by a consumer: settling it for good deletes it from the stream;
// a Nak leaves it for the next sweep.
type strayMsg struct {
	raw    *jetstream.RawStreamMsg
	stream jetstream.Stream
}

var _ jetstream.Msg = (*strayMsg)(nil)

func (m *strayMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{
		Sequence: jetstream.SequencePair{Stream: m.raw.Sequence}, NumDelivered: 1,
		Stream: contract.JobsStream, Timestamp: m.raw.Time,
	}, nil
}
func (m *strayMsg) Data() []byte                     { return m.raw.Data }
func (m *strayMsg) Headers() nats.Header             { return m.raw.Header }
func (m *strayMsg) Subject() string                  { return m.raw.Subject }
func (m *strayMsg) Reply() string                    { return "" }
func (m *strayMsg) Ack() error                       { return m.remove() }
func (m *strayMsg) DoubleAck(context.Context) error  { return m.remove() }
func (m *strayMsg) Nak() error                       { return nil }
func (m *strayMsg) NakWithDelay(time.Duration) error { return nil }
func (m *strayMsg) InProgress() error                { return nil }
func (m *strayMsg) Term() error                      { return m.remove() }
func (m *strayMsg) TermWithReason(string) error      { return m.remove() }

// remove deletes the message; one already deleted (by another worker's
// sweep) is not an error.
func (m *strayMsg) remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := m.stream.DeleteMsg(ctx, m.raw.Sequence)
	if errors.Is(err, jetstream.ErrMsgDeleteUnsuccessful) {
		if _, gerr := m.stream.GetMsg(ctx, m.raw.Sequence); errors.Is(gerr, jetstream.ErrMsgNotFound) {
			return nil
		}
	}
	return err
}
