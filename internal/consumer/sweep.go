package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobqueue"
	"github.com/sluice-dev/sluice/internal/reach"
)

// SLUICE_JOBS takes every subject under sluice.jobs. (docs/producing.md),
// but its durable consumers deliver only sluice.jobs.<kind>: a message
// published anywhere else (sluice.jobs.vidoe, sluice.jobs.speech.extra)
// is stored and no consumer would ever deliver it. The sweep finds such
// messages by the stream's subject counts (one request per sweep, whatever
// the depth of the queue) and hands each to the Handler like a delivery;
// settling it deletes it from the stream (Ack, Term) or leaves it for the
// next sweep (a retry). The same counts give the jobs waiting per kind.
//
// The sweep also hands over orphans: messages of a kind served that the
// kind's consumer will not deliver again. SLUICE_JOBS is a work queue, so
// an acknowledged message is deleted; one still stored at or below its
// consumer's ack floor is neither pending nor awaiting an ack, and no
// consumer delivers it (see docs/guarantees.md). Finding them costs one
// consumer info per kind with messages; messages are read only when the
// stream's first sequence is at or below that kind's ack floor.
//
// An orphan is handed over only when two consecutive sweeps found it: an
// acknowledged message is deleted a moment after the floor passes it, and
// a new leader may report an odd floor for a moment. It runs in a
// goroutine of its own (it is a real job, which may run long) and the
// Handler's own checks decide what to do with it (Delivery.Orphaned tells
// it apart). A worker does not hand over a message it is still handling,
// but another worker's sweep may (no AckWait guards it): the Handler must
// allow for that. The Gate decides as for a pull: a handover takes a
// reservation, and while the Gate lets no job of the kind start the
// orphan stays in the stream until a sweep the Gate allows.

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

// sweep reports the jobs waiting per kind, handles every message on a
// subject that no consumer serves and hands over the orphans. A failed
// sweep forgets which orphans were found (not which are logged): two
// sweeps in a row means two that succeeded, with no failure (an election,
// say) between them.
func (c *Consumer) sweep(ctx, handlerCtx context.Context) (err error) {
	c.sweeps.Add(1)
	defer func() {
		if err != nil {
			for seq, o := range c.orphans {
				c.orphans[seq] = orphan{logged: o.logged}
			}
		}
	}()
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
	c.reportWaiting(info.State.Subjects)
	for subject, n := range info.State.Subjects {
		if n == 0 || contract.Served(subject) {
			continue
		}
		if err := c.sweepSubject(ctx, handlerCtx, stream, subject, info.State.FirstSeq); err != nil {
			return err
		}
	}
	if err := c.sweepOrphans(ctx, handlerCtx, stream, info.State); err != nil {
		return err
	}
	c.dropIdleClasses(ctx, stream, time.Now())
	return nil
}

// reportWaiting reports the jobs waiting per kind, in its consumer and its
// class queues, and per class queue, and tells each kind's fetch loop
// whether its class queues hold jobs.
func (c *Consumer) reportWaiting(subjects map[string]uint64) {
	waiting := make(map[string]int, len(contract.Kinds))
	inClasses := make(map[string]bool, len(contract.Kinds))
	seen := make(map[string]bool)
	for subject, n := range subjects {
		if kind, ok := contract.IntakeKind(subject); ok {
			waiting[kind] += int(n)
		}
		if cl, ok := contract.ParseClassSubject(subject); ok {
			waiting[cl.Kind] += int(n)
			inClasses[cl.Kind] = inClasses[cl.Kind] || n > 0
			seen[subject] = true
			if c.cfg.Observer.WaitingClass != nil {
				c.cfg.Observer.WaitingClass(cl.Kind, cl.Tenant, cl.Priority, int(n))
			}
		}
	}
	for subject := range c.classesSeen {
		if cl, ok := contract.ParseClassSubject(subject); ok && !seen[subject] && c.cfg.Observer.WaitingClass != nil {
			c.cfg.Observer.WaitingClass(cl.Kind, cl.Tenant, cl.Priority, 0)
		}
	}
	c.classesSeen = seen
	c.classesUsed = c.classesUsed || len(seen) > 0
	for _, kind := range contract.Kinds {
		if c.cfg.Observer.Waiting != nil {
			c.cfg.Observer.Waiting(kind, waiting[kind])
		}
	}
	for _, kind := range c.cfg.Kinds {
		c.classes.of(kind).swept.Store(inClasses[kind])
	}
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
		c.log.Warn().Str("subject", raw.Subject).Uint64("seq", raw.Sequence).Str("kind", contract.KindOfMessage(raw.Subject, raw.Data)).
			Msg("job message on a subject no worker serves")
		c.handOver(handlerCtx, stream, raw, false, nil)
	}
	return nil
}

// orphan is what the sweep knows of an orphan: whether the last sweep
// found it (two in a row hand it over), and whether it is logged as handed
// over (logged) or as left for the Gate (gated).
type orphan struct{ found, logged, gated bool }

// sweepOrphans finds the orphans of the kinds served (see above), on the
// kind's subject and its class queues', and hands over those the last
// sweep found too. st is the stream's state as this sweep read it.
func (c *Consumer) sweepOrphans(ctx, handlerCtx context.Context, stream jetstream.Stream, st jetstream.StreamState) error {
	found := make(map[uint64]orphan)
	for _, kind := range c.cfg.Kinds {
		for subject, n := range st.Subjects {
			name := contract.ConsumerName(kind)
			if cl, ok := contract.ParseClassSubject(subject); ok && cl.Kind == kind {
				name = contract.ClassConsumerName(kind, cl.Priority, cl.Tenant)
			} else if k, ok := contract.IntakeKind(subject); !ok || k != kind {
				// (sluice.jobs.<kind> and its tenant subjects are the
				// kind consumer's.)
				continue
			}
			if n == 0 {
				continue
			}
			if err := c.sweepFloor(ctx, handlerCtx, stream, st, kind, subject, name, found); err != nil {
				return err
			}
		}
	}
	c.orphans = found
	// A handover settled before this sweep began has left the stream, or
	// is found again (a retry) and handed over again.
	c.mu.Lock()
	for seq, settled := range c.handing {
		if _, ok := found[seq]; !ok && settled >= 0 && settled < c.sweeps.Load() {
			delete(c.handing, seq)
		}
	}
	c.mu.Unlock()
	return nil
}

// sweepFloor reads the messages of subject at or below the ack floor of
// its consumer, name, into found, handing over those the last sweep found
// too. A class queue whose consumer no worker has created yet has no floor.
func (c *Consumer) sweepFloor(ctx, handlerCtx context.Context, stream jetstream.Stream, st jetstream.StreamState,
	kind, subject, name string, found map[uint64]orphan) error {
	cn, err := stream.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) && subject != contract.JobSubject(kind) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("consumer %s: %w", name, err)
	}
	ci := cn.CachedInfo()
	// Only the consumer's leader, hearing a quorum of its group, knows
	// the floor: a member of a leaderless group answers from its own
	// copy, which may be ahead of what the group agreed.
	if err := reach.Quorum(ci.Cluster, c.cfg.Reach.StaleAfter()); err != nil {
		return fmt.Errorf("consumer %s: %w", name, err)
	}
	floor := ci.AckFloor.Stream
	for seq := max(st.FirstSeq, 1); seq <= floor && ctx.Err() == nil; {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return err
		}
		if raw.Sequence > floor {
			break
		}
		seq = raw.Sequence + 1
		o := c.orphans[raw.Sequence]
		if o.found {
			o = c.handOrphan(handlerCtx, stream, raw, kind, floor, o)
		}
		o.found = true
		found[raw.Sequence] = o
	}
	return nil
}

// LogOrphan is the message of the warning a worker logs, with the job id,
// the kind, the stream sequence and the ack floor, the first time it hands
// over an orphan. The reliability harness counts these lines.
const LogOrphan = "job message below its consumer's ack floor: handing it over"

// LogOrphanGated is the message of the line a worker logs, with the job
// id, the kind and the stream sequence, the first time it leaves an orphan
// in the stream because its Gate lets no job of the kind start.
const LogOrphanGated = "job message below its consumer's ack floor: left in the stream while this worker may start no job of its kind"

// handOrphan hands the orphan raw over in a goroutine of its own, unless
// this worker is still handling it or settled it during this sweep (which
// may have read the message before it was deleted), or the Gate lets no
// job of kind start now. It logs (and counts) the first handover and the
// first time the Gate kept it back, and returns what is known of it then.
func (c *Consumer) handOrphan(ctx context.Context, stream jetstream.Stream, raw *jetstream.RawStreamMsg, kind string, floor uint64, o orphan) orphan {
	// Only the sweep marks a message handed over, so it cannot become busy
	// between this check and the mark below.
	c.mu.Lock()
	settled, handed := c.handing[raw.Sequence]
	busy := handed && (settled < 0 || settled >= c.sweeps.Load())
	c.mu.Unlock()
	if busy {
		return o
	}
	if c.cfg.Gate != nil && c.cfg.Gate.Reserve(kind, 1) == 0 {
		if !o.gated {
			c.log.Info().Str("job_id", jobqueue.JobID(raw)).Str("kind", kind).Uint64("seq", raw.Sequence).Msg(LogOrphanGated)
		}
		o.gated = true
		return o
	}
	c.mu.Lock()
	c.handing[raw.Sequence] = -1
	c.mu.Unlock()
	if !o.logged {
		c.log.Warn().Str("job_id", jobqueue.JobID(raw)).Str("kind", kind).Uint64("seq", raw.Sequence).Uint64("ack_floor", floor).
			Msg(LogOrphan)
		if c.cfg.Observer.Orphaned != nil {
			c.cfg.Observer.Orphaned(kind)
		}
	}
	o.logged = true
	done := func() {
		c.mu.Lock()
		c.handing[raw.Sequence] = c.sweeps.Load()
		c.mu.Unlock()
		c.wg.Done()
	}
	c.wg.Add(1)
	c.cfg.Pool.Go(func() {
		select {
		case <-c.stopping:
			// Left for the next sweep, of another worker: the reservation
			// goes unused.
			if c.cfg.Gate != nil {
				c.cfg.Gate.Unreserve(kind, 1)
			}
			done()
		default:
			c.handOver(ctx, stream, raw, true, done)
		}
	})
	return o
}

// handOver runs the Handler on a message that no consumer delivers and
// settles it unless the Handler detached it; done runs once it is settled.
// Its Delivery's Kind is contract.KindOfMessage's answer; the Handler tells
// it from a real delivery by its subject, or by Delivery.Orphaned.
func (c *Consumer) handOver(ctx context.Context, stream jetstream.Stream, raw *jetstream.RawStreamMsg, orphaned bool, done func()) {
	msg := &strayMsg{raw: raw, stream: stream}
	meta, _ := msg.Metadata()
	d := &Delivery{Kind: contract.KindOfMessage(raw.Subject, raw.Data), Msg: msg, Meta: meta, stopping: c.stopping, c: c,
		orphaned: orphaned, done: done}
	ctx = c.startProcess(ctx, d)
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
