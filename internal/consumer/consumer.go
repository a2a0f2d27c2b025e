// Package consumer takes job messages from the contract's durable pull
// consumers and settles them: it pulls only for free slots, sends
// InProgress heartbeats for every held message so that its AckWait never
// runs out, hands each message to a Handler, and turns the Handler's
// Outcome into Ack, NakWithDelay, Nak or a dead letter plus Term. It knows
// nothing of what a job does.
//
// "Held" means one thing here: a message this worker took (pulled, or
// handed over by the sweep) and has not settled yet. It takes a slot of
// MaxInflight and gets heartbeats. A message the admission moves to its
// class queue (admit.go) is not held.
package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/gopool"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/reach"
	"github.com/sluice-dev/sluice/internal/tracing"
)

// Action is what to do with a message once its Handler returns.
type Action int

// The actions.
const (
	// Ack: the job is finished (its terminal event is published).
	Ack Action = iota
	// Retry: a transient failure; redeliver after Outcome.Delay.
	Retry
	// Release: the worker is stopping; redeliver now to another worker.
	Release
	// DeadLetter: copy the message to SLUICE_DLQ with Outcome.Reason, then
	// Term it. The job's failed event is already published.
	DeadLetter
	// Detach: the Handler keeps the job past its return and settles it
	// later with Delivery.Settle. The message stays held (its slot taken,
	// its heartbeats sent, a graceful stop waits for it) but no goroutine
	// waits for it: a job waiting hours for an upstream task costs its
	// state, not a goroutine stack.
	Detach
)

func (a Action) String() string {
	switch a {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case Release:
		return "release"
	case DeadLetter:
		return "dead_letter"
	case Detach:
		return "detach"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// Outcome is a Handler's verdict on one message.
type Outcome struct {
	Action Action
	// Delay is the redelivery delay of Retry.
	Delay time.Duration
	// Reason is the one-line Sluice-Error header of DeadLetter.
	Reason string
	// JobID is the Sluice-Job-Id header of DeadLetter, when known.
	JobID string
	// Unconfirmed, when set on Ack, makes the ack wait for the server's
	// confirmation (a double ack: on SLUICE_JOBS, a work queue, the
	// message is then removed for good and never delivered again). When
	// none comes within AckConfirmTimeout, Unconfirmed runs (with as
	// long again): the message may be delivered again, and the Handler
	// records what that delivery needs to know.
	Unconfirmed func(context.Context)
}

// AckConfirmTimeout bounds the wait for a confirmed ack (Outcome.Unconfirmed).
const AckConfirmTimeout = 5 * time.Second

// Delivery is one delivered job message.
type Delivery struct {
	// Kind is the kind served by the consumer that delivered it.
	Kind     string
	Msg      jetstream.Msg
	Meta     *jetstream.MsgMetadata
	stopping <-chan struct{}
	c        *Consumer
	// started ends the start phase, once (startedOnce); done frees the
	// message's slot, once (settled).
	started     func()
	startedOnce atomic.Bool
	done        func()
	settled     atomic.Bool
	// orphaned: the sweep handed the message over (see Orphaned).
	orphaned bool
	// span is the job's process span (tracing.go), ended once settled.
	span trace.Span
}

// Orphaned reports whether the sweep handed this message over because its
// consumer will not deliver it again: it is still in SLUICE_JOBS at or
// below the consumer's ack floor (see sweep.go). No AckWait guards such a
// message: another worker's sweep may hand it over too.
func (d *Delivery) Orphaned() bool { return d.orphaned }

// AckWait is how long JetStream waits for an ack or a heartbeat of a
// delivered message before it delivers the message again: the consumers'
// AckWait.
func (d *Delivery) AckWait() time.Duration {
	if d.c == nil {
		return 0
	}
	return d.c.cfg.AckWait
}

// Started tells the consumer that the Handler's start phase is over: from
// now on the job may wait long (for an upstream task, a stream, a compute
// job) and another message may start. It is implied when Handle returns;
// only the first call counts.
func (d *Delivery) Started() {
	if d.started != nil && d.startedOnce.CompareAndSwap(false, true) {
		d.started()
	}
}

// Settle settles a detached message (see Detach) with out, which must not
// be Detach, and frees its slot. Only the first call counts. It is safe to
// call from any goroutine, even before Handle has returned.
func (d *Delivery) Settle(ctx context.Context, out Outcome) {
	if out.Action == Detach || !d.settled.CompareAndSwap(false, true) {
		return
	}
	if d.c != nil {
		d.c.settleTraced(ctx, d, out)
	}
	if d.done != nil {
		d.done()
	}
}

// Done reports whether the delivery is settled.
func (d *Delivery) Done() bool { return d.settled.Load() }

// Stopping is closed when the worker begins a graceful stop: a Handler
// should then checkpoint and return Release as soon as it safely can.
func (d *Delivery) Stopping() <-chan struct{} { return d.stopping }

// NumDelivered is how many times JetStream has delivered this message.
func (d *Delivery) NumDelivered() uint64 {
	if d.Meta == nil {
		return 1
	}
	return d.Meta.NumDelivered
}

// Published is when SLUICE_JOBS stored the job's message (zero when
// unknown): for a message admitted to a class queue, when the stream
// stored the message its producer published (Sluice-Published).
func (d *Delivery) Published() time.Time {
	if d.Msg != nil {
		if h := d.Msg.Headers().Get(contract.HeaderPublished); h != "" {
			if _, ok := contract.ParseClassSubject(d.Msg.Subject()); ok {
				if t, err := time.Parse(time.RFC3339Nano, h); err == nil {
					return t
				}
			}
		}
	}
	if d.Meta == nil {
		return time.Time{}
	}
	return d.Meta.Timestamp
}

// StreamSeq is the message's sequence in SLUICE_JOBS.
func (d *Delivery) StreamSeq() uint64 {
	if d.Meta == nil {
		return 0
	}
	return d.Meta.Sequence.Stream
}

// Handler runs one job. Handle must return an Outcome for every message,
// or Detach and settle it later with Delivery.Settle (also when Stopping
// is closed, as soon as it safely can). ctx ends only when the graceful
// stop's deadline has passed.
type Handler interface {
	Handle(ctx context.Context, d *Delivery) Outcome
}

// Observer receives the consumer's measurements; nil fields are skipped.
type Observer struct {
	Held    func(kind string, delta int)
	Settled func(kind string, a Action)
	// Waiting receives, at every sweep, the number of job messages of
	// kind in SLUICE_JOBS (queued, held or waiting for a retry).
	Waiting func(kind string, n int)
	// Orphaned counts a job message of kind found at or below its
	// consumer's ack floor and handed over by the sweep, once per message.
	Orphaned func(kind string)
	// WaitingClass receives, at every sweep, the number of job messages in
	// each class queue of kind (classes.go); 0 once a queue is empty.
	WaitingClass func(kind, tenant string, priority, n int)
}

// Gate says how many jobs of a kind may start now (the artifact store's
// reach, the fleet's quotas, see internal/quota): the consumer pulls no
// more than that, and the sweep hands an orphan over only when one may
// start (see sweep.go).
type Gate interface {
	// Reserve returns how many of n jobs of kind may be pulled (or handed
	// over) now and counts them as starting.
	Reserve(kind string, n int) int
	// Unreserve drops the n reservations (0 or more) that the pull just
	// made did not use.
	Unreserve(kind string, n int)
}

// GateChanged returns a channel closed when kind's Gate may allow more
// than it did (the fleet's quota board changed); nil for never.
type GateChanged func(kind string) <-chan struct{}

// gateWait is how long a kind whose Gate allows no job waits before it
// asks again.
const gateWait = 250 * time.Millisecond

// The defaults of Config that are also the worker's: internal/config
// takes SLUICE_MAX_INFLIGHT, SLUICE_ACK_WAIT, SLUICE_SHUTDOWN_TIMEOUT and
// SLUICE_SWEEP_INTERVAL's defaults from here, so each is stated once.
const (
	DefaultMaxInflight     = 256
	DefaultAckWait         = contract.DefaultAckWait
	DefaultShutdownTimeout = 30 * time.Second
	DefaultSweepInterval   = 10 * time.Second
	DefaultPriorityAging   = 10 * time.Minute
)

// Config configures a Consumer.
type Config struct {
	// JS is the JetStream context. Required.
	JS jetstream.JetStream
	// Kinds are the kinds served. Required.
	Kinds []string
	// MaxInflight is the most jobs of one kind held at once. Defaults to 256.
	MaxInflight int
	// MaxStarting is the most Handlers of one kind in their start phase at
	// once: from the Handler's start to Delivery.Started or its return.
	// Held messages beyond it wait without a goroutine. Defaults to 64.
	MaxStarting int
	// AckWait is the consumers' AckWait; heartbeats go out every quarter of
	// it. Defaults to 60s.
	AckWait time.Duration
	// FetchWait is how long one pull request waits for messages. Defaults
	// to 2s.
	FetchWait time.Duration
	// ShutdownTimeout bounds a graceful stop. Defaults to 30s.
	ShutdownTimeout time.Duration
	// SweepInterval is how often SLUICE_JOBS is swept for messages on
	// subjects no consumer serves and for messages of the kinds served
	// that their consumer will not deliver again, which are handed to the
	// Handler like deliveries (see sweep.go), and for the jobs waiting per
	// kind. Defaults to 10s.
	SweepInterval time.Duration
	// Logger defaults to a disabled logger.
	Logger *zerolog.Logger
	// Observer is optional.
	Observer Observer
	// Pool runs the Handlers; share it with a Handler's own goroutines
	// (see gopool). Defaults to a pool of its own.
	Pool *gopool.Pool
	// Reach hears how every pull, probe and heartbeat went, and moves the
	// connection when the server it reaches has lost the cluster. Optional.
	Reach *reach.Watch
	// Backoff spaces pulls after a failed one (no responders, a timeout, a
	// leadership change, a 503...). Defaults to 500ms doubling up to 5s.
	Backoff backoff.Exponential
	// Gate, when set, bounds each pull and the sweep's handovers to the
	// jobs that may start. Optional.
	Gate Gate
	// GateChanged, when set, wakes a kind that Gate held back as soon as
	// Gate may allow more. Optional.
	GateChanged GateChanged
	// Tracer starts each job's process span, linked to the producer's
	// context its message carries (tracing.go). Defaults to the no-op
	// provider.
	Tracer trace.TracerProvider
	// Propagator reads the producer's context from a message's headers.
	// Defaults to W3C trace context.
	Propagator propagation.TextMapPropagator
	// Policy says whether jobs start in fair order from class queues and
	// what each tenant's weight, cap and budget allow (admit.go,
	// classes.go). Defaults to a policy that is never enabled.
	Policy order.Policy
	// PriorityAging makes a waiting job one priority level more urgent per
	// PriorityAging waited. Defaults to 0: never (the worker's
	// SLUICE_PRIORITY_AGING defaults to DefaultPriorityAging).
	PriorityAging time.Duration
}

func (c Config) withDefaults() Config {
	c.MaxInflight = cmp.Or(c.MaxInflight, DefaultMaxInflight)
	c.MaxStarting = cmp.Or(c.MaxStarting, 64)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.FetchWait = cmp.Or(c.FetchWait, 2*time.Second)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, DefaultShutdownTimeout)
	c.SweepInterval = cmp.Or(c.SweepInterval, DefaultSweepInterval)
	c.Backoff.Min = cmp.Or(c.Backoff.Min, 500*time.Millisecond)
	c.Backoff.Max = cmp.Or(c.Backoff.Max, 5*time.Second)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
	}
	if c.Pool == nil {
		c.Pool = gopool.New(0)
	}
	if c.Tracer == nil {
		c.Tracer = noop.NewTracerProvider()
	}
	if c.Propagator == nil {
		c.Propagator = tracing.Propagator()
	}
	if c.Policy == nil {
		c.Policy = (*order.Static)(nil)
	}
	return c
}

// Consumer pulls jobs for its kinds and runs them through a Handler.
type Consumer struct {
	cfg     Config
	handler Handler
	log     zerolog.Logger

	mu   sync.Mutex
	held map[jetstream.Msg]string // message -> kind
	// handing are the stream sequences of the orphans this worker has
	// handed over (guarded by mu): -1 while the Handler has it, then the
	// number of the sweep during which it was settled (see sweeps);
	// orphans those the sweep knows of (the sweep's own).
	handing map[uint64]int64
	sweeps  atomic.Int64
	orphans map[uint64]orphan
	// classes are the kinds' class queues; classesSeen the class subjects
	// the last sweep reported to Observer.WaitingClass.
	classes     classSet
	classesSeen map[string]bool
	// idleChecked is when the sweep last looked for idle class consumers
	// (idle.go); classesUsed whether any sweep saw jobs in class queues.
	idleChecked time.Time
	classesUsed bool

	stopping chan struct{}
	// pullsDone is closed once no pull request of this worker is pending:
	// released jobs are Naked only then, or the stopping worker's own
	// pending pull would take them straight back.
	pullsDone chan struct{}
	wg        sync.WaitGroup
}

// New returns a Consumer; call Run to start it.
func New(cfg Config, h Handler) (*Consumer, error) {
	cfg = cfg.withDefaults()
	if cfg.JS == nil {
		return nil, errors.New("consumer: JS is required")
	}
	if len(cfg.Kinds) == 0 {
		return nil, errors.New("consumer: at least one kind is required")
	}
	return &Consumer{
		cfg:       cfg,
		handler:   h,
		log:       *cfg.Logger,
		held:      make(map[jetstream.Msg]string),
		handing:   make(map[uint64]int64),
		stopping:  make(chan struct{}),
		pullsDone: make(chan struct{}),
	}, nil
}

// Run serves until ctx is done, then stops gracefully: it stops pulling,
// tells every Handler to checkpoint and release its job, waits for them
// until ShutdownTimeout, and Naks whatever is still held so that another
// worker resumes it at once. It returns nil after a graceful stop.
func (c *Consumer) Run(ctx context.Context) error {
	handlerCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()

	var fetchers, dispatchers sync.WaitGroup
	for _, kind := range c.cfg.Kinds {
		slots := make(chan struct{}, c.cfg.MaxInflight)
		queue := make(chan jetstream.Msg, c.cfg.MaxInflight)
		fetchers.Go(func() { c.fetchLoop(ctx, kind, slots, queue) })
		fetchers.Go(func() { c.admitLoop(ctx, kind) })
		dispatchers.Go(func() { c.dispatch(handlerCtx, kind, slots, queue) })
	}
	var sweeper sync.WaitGroup
	sweeper.Go(func() { c.sweepLoop(ctx, handlerCtx) })
	hbDone := make(chan struct{})
	go c.heartbeats(hbDone)

	<-ctx.Done()
	deadline := time.After(c.cfg.ShutdownTimeout * 9 / 10)
	close(c.stopping)
	c.log.Info().Int("held", c.heldCount()).Msg("stopping: releasing held jobs")
	fetchers.Wait()
	close(c.pullsDone)
	dispatchers.Wait()
	sweeper.Wait()

	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-deadline:
	}
	select {
	case <-done:
	default:
		// Past the deadline with jobs still running: hand them back.
		if held := c.heldMessages(); len(held) > 0 {
			c.log.Warn().Int("held", len(held)).Msg("shutdown timeout: handing back jobs still running")
			for _, m := range held {
				_ = m.Nak()
			}
		}
		hardStop()
		select {
		case <-done:
		case <-time.After(c.cfg.ShutdownTimeout / 10):
		}
	}
	close(hbDone)
	return nil
}

// fetchLoop binds kind's consumer, then pulls at most as many messages as
// kind has free slots, and the Gate allows, so no message waits in a
// client buffer while its AckWait runs. A pulled message is held and
// queued for dispatch at once; queue is closed when the loop ends.
//
// Every failure, whether Fetch returns it or it ends the batch (no
// responders, no answer, a leadership change, a 503), spaces the next pull
// with Backoff and is reported to Reach. An empty pull proves little (a
// leader cut off from its group still answers "no messages"), so while
// pulls come back empty the loop asks the consumer's leader, every
// Reach.ProbeEvery, whether it still hears a quorum of its group.
func (c *Consumer) fetchLoop(ctx context.Context, kind string, slots chan struct{}, queue chan<- jetstream.Msg) {
	defer close(queue)
	loop := c.cfg.Reach.Loop("pull " + kind)
	cn, err := c.bind(ctx, kind, loop)
	if err != nil {
		return
	}
	q := c.classes.of(kind)
	q.base = cn.CachedInfo().Config
	attempt := 0
	lastAnswer := time.Now()
	for {
		// A stopping worker starts no new pull. The select alone would
		// take a free slot as often as it sees ctx done, and every pull
		// started then adds FetchWait to the stop.
		if ctx.Err() != nil {
			return
		}
		free, gated, ok := c.takeSlots(ctx, kind, slots)
		if !ok {
			return
		}
		if free == 0 {
			continue
		}
		classes := c.fromClasses(q)
		var got int
		if classes {
			got, err = c.pullClasses(ctx, q, free, queue)
		} else {
			got, err = c.pull(kind, cn, free, !gated, queue)
		}
		for range free - got {
			<-slots
		}
		if c.cfg.Gate != nil {
			c.cfg.Gate.Unreserve(kind, free-got)
		}
		if classes && got == 0 && err == nil && q.idle(ctx) != nil {
			return
		}
		if gated && !classes && got == 0 && err == nil && backoff.Sleep(ctx, gateWait) != nil {
			return
		}
		answer := got > 0 || (classes && err == nil)
		if every := c.cfg.Reach.ProbeEvery(); err == nil && !answer && every > 0 && time.Since(lastAnswer) >= every {
			err = c.probe(cn)
			answer = err == nil
		}
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			loop.Fail(err)
			c.log.Debug().Err(err).Str("kind", kind).Msg("pull failed")
			if backoff.Sleep(ctx, c.cfg.Backoff.Delay(attempt)) != nil {
				return
			}
			attempt++
		case answer:
			loop.OK()
			attempt = 0
			lastAnswer = time.Now()
		}
	}
}

// bind looks kind's consumer up, with Backoff between failed attempts,
// until ctx ends.
func (c *Consumer) bind(ctx context.Context, kind string, loop *reach.Loop) (jetstream.Consumer, error) {
	name := contract.ConsumerName(kind)
	var cn jetstream.Consumer
	err := backoff.Retry{Spacing: c.cfg.Backoff}.Do(ctx, func(ctx context.Context, _ int) error {
		bctx, cancel := context.WithTimeout(ctx, c.cfg.FetchWait)
		defer cancel()
		var err error
		if cn, err = c.cfg.JS.Consumer(bctx, contract.JobsStream, name); err != nil {
			if ctx.Err() != nil {
				return backoff.Permanent(err)
			}
			err = fmt.Errorf("bind consumer %s: %w", name, err)
			loop.Fail(err)
			c.log.Debug().Err(err).Str("kind", kind).Msg("pull failed")
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	loop.OK()
	return cn, nil
}

// takeSlots waits for one free slot of kind, takes every other free one
// and lets the Gate bound them: free is how many a pull may fill, gated
// whether the Gate allowed fewer than were free. With no job allowed it
// waits gateWait and returns free 0; ok is false once ctx ends.
func (c *Consumer) takeSlots(ctx context.Context, kind string, slots chan struct{}) (free int, gated, ok bool) {
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return 0, false, false
	}
	free = 1
	for free < c.cfg.MaxInflight {
		select {
		case slots <- struct{}{}:
			free++
			continue
		default:
		}
		break
	}
	if c.cfg.Gate == nil {
		return free, false, true
	}
	var changed <-chan struct{}
	if c.cfg.GateChanged != nil {
		changed = c.cfg.GateChanged(kind)
	}
	allowed := c.cfg.Gate.Reserve(kind, free)
	for range free - allowed {
		<-slots
	}
	if allowed == 0 {
		// A place freed on the board is used at once, not a gateWait
		// later: with short tasks that wait is quota left idle.
		t := time.NewTimer(gateWait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return 0, false, false
		case <-t.C:
		case <-changed:
		}
		return 0, false, true
	}
	return allowed, allowed < free, true
}

// pull sends one pull request for up to free messages, holds and queues
// what arrives, and returns how many did and the error that ended the
// batch. Without wait it takes only what is there at once: a pull the
// fleet's quota bounds must not keep the places it reserved for FetchWait
// while another kind of the same resource could use them. The pull is not
// cancelled with the worker's context: a stopping worker waits for its
// pending pulls to end (see pullsDone). A pull that gets no answer at all
// ends with context.DeadlineExceeded shortly after FetchWait.
func (c *Consumer) pull(kind string, cn jetstream.Consumer, free int, wait bool, queue chan<- jetstream.Msg) (got int, err error) {
	fctx, cancel := context.WithTimeout(context.Background(), c.cfg.FetchWait+min(c.cfg.FetchWait/9, time.Second))
	defer cancel()
	var batch jetstream.MessageBatch
	if wait {
		batch, err = cn.Fetch(free, jetstream.FetchContext(fctx))
	} else {
		batch, err = cn.FetchNoWait(free)
	}
	if err != nil {
		return 0, err
	}
	for msg := range batch.Messages() {
		got++
		c.hold(msg, kind)
		c.wg.Add(1)
		queue <- msg // never blocks: a slot was taken for it
	}
	return got, batch.Error()
}

// probe asks the consumer's leader whether it still hears a quorum of its
// group (see reach.Quorum).
func (c *Consumer) probe(cn jetstream.Consumer) error {
	pctx, cancel := context.WithTimeout(context.Background(), c.cfg.FetchWait)
	defer cancel()
	info, err := cn.Info(pctx)
	if err != nil {
		return fmt.Errorf("consumer info: %w", err)
	}
	return reach.Quorum(info.Cluster, c.cfg.Reach.StaleAfter())
}

// dispatch starts a Handler for each queued message, at most MaxStarting
// in their start phase at once (see Delivery.Started). A message waiting
// for its turn is held (its heartbeats sent), but no goroutine waits for
// it: a burst of 10,000 jobs does not grow 10,000 goroutine stacks. During
// a stop, queued messages are handed back at once.
func (c *Consumer) dispatch(ctx context.Context, kind string, slots <-chan struct{}, queue <-chan jetstream.Msg) {
	starting := make(chan struct{}, c.cfg.MaxStarting)
	for msg := range queue {
		started := func() {}
		select {
		case starting <- struct{}{}:
			started = func() { <-starting }
		case <-c.stopping:
		}
		c.cfg.Pool.Go(func() {
			c.handle(ctx, kind, msg, started, func() {
				c.drop(msg)
				<-slots
				c.wg.Done()
			})
		})
	}
}

// handle runs msg's Handler and settles the message, unless the Handler
// detached it; started ends its start phase, done frees the message's
// slot once it is settled.
func (c *Consumer) handle(ctx context.Context, kind string, msg jetstream.Msg, started, done func()) {
	meta, _ := msg.Metadata()
	d := &Delivery{Kind: kind, Msg: msg, Meta: meta, stopping: c.stopping, c: c, started: started, done: done}
	ctx = c.startProcess(ctx, d)
	defer d.Started()
	select {
	case <-c.stopping:
		d.Settle(ctx, Outcome{Action: Release})
		return
	default:
	}
	if out := c.safeHandle(ctx, d); out.Action != Detach {
		d.Settle(ctx, out)
	}
}

// safeHandle turns a Handler panic into a delayed retry: a bug must not take
// the whole worker, and its held jobs, down with it.
func (c *Consumer) safeHandle(ctx context.Context, d *Delivery) (out Outcome) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error().Str("kind", d.Kind).Uint64("seq", d.StreamSeq()).Interface("panic", r).Msg("handler panicked; retrying the job later")
			out = Outcome{Action: Retry, Delay: 30 * time.Second}
		}
	}()
	return c.handler.Handle(ctx, d)
}

// awaitPulls waits, during a stop, until this worker has no pull pending.
func (c *Consumer) awaitPulls() {
	select {
	case <-c.stopping:
		<-c.pullsDone
	default:
	}
}

func (c *Consumer) settle(ctx context.Context, d *Delivery, out Outcome) {
	msg := d.Msg
	var err error
	switch out.Action {
	case Ack:
		if out.Unconfirmed == nil {
			err = msg.Ack()
			break
		}
		// Waited for even when the worker is stopping: an ack given up
		// would deliver a finished job again.
		bg := context.WithoutCancel(ctx)
		actx, cancel := context.WithTimeout(bg, AckConfirmTimeout)
		err = msg.DoubleAck(actx)
		cancel()
		if err != nil {
			uctx, cancel := context.WithTimeout(bg, AckConfirmTimeout)
			out.Unconfirmed(uctx)
			cancel()
		}
	case Retry:
		err = msg.NakWithDelay(out.Delay)
	case Release:
		c.awaitPulls()
		err = msg.Nak()
	case DeadLetter:
		if err = c.deadLetter(ctx, d, out); err != nil {
			c.log.Error().Err(err).Str("kind", d.Kind).Str("job_id", out.JobID).Msg("dead letter failed; retrying the job later")
			err = msg.NakWithDelay(5 * time.Second)
			out.Action = Retry
		} else {
			err = msg.Term()
		}
	}
	if err != nil {
		c.log.Warn().Err(err).Str("kind", d.Kind).Str("action", out.Action.String()).Msg("settling message failed; JetStream will redeliver it")
	}
	c.observe(d.Kind, out.Action)
}

// deadLetter copies the message unchanged to sluice.dlq.<kind>, keeping its
// headers and adding Sluice-Error and Sluice-Job-Id.
func (c *Consumer) deadLetter(ctx context.Context, d *Delivery, out Outcome) error {
	m := nats.NewMsg(contract.DLQSubject(d.Kind))
	m.Data = d.Msg.Data()
	for k, v := range d.Msg.Headers() {
		m.Header[k] = v
	}
	m.Header.Set(contract.HeaderError, oneLine(out.Reason))
	if out.JobID != "" {
		m.Header.Set(contract.HeaderJobID, out.JobID)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.cfg.JS.PublishMsg(pctx, m)
	return err
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 1024 {
		s = s[:1021] + "..."
	}
	return s
}

// heartbeats sends InProgress for every held message four times per
// AckWait, so a held message is not delivered again while its worker
// lives, however long its job waits, and is within AckWait of the
// worker's death. A heartbeat that cannot be sent is reported to Reach;
// the ticker paces the retries.
func (c *Consumer) heartbeats(done <-chan struct{}) {
	t := time.NewTicker(c.cfg.AckWait / 4)
	defer t.Stop()
	loop := c.cfg.Reach.Loop("heartbeats")
	for {
		select {
		case <-done:
			return
		case <-t.C:
			var failed error
			for _, m := range c.heldMessages() {
				if err := m.InProgress(); err != nil {
					failed = err
				}
			}
			if failed != nil {
				loop.Fail(failed)
			} else {
				loop.Sent()
			}
		}
	}
}

// hold counts m as held (see the package doc) until drop.
func (c *Consumer) hold(m jetstream.Msg, kind string) {
	c.mu.Lock()
	c.held[m] = kind
	c.mu.Unlock()
	if c.cfg.Observer.Held != nil {
		c.cfg.Observer.Held(kind, 1)
	}
}

// drop ends m's hold once it is settled.
func (c *Consumer) drop(m jetstream.Msg) {
	c.mu.Lock()
	kind := c.held[m]
	delete(c.held, m)
	c.mu.Unlock()
	if c.cfg.Observer.Held != nil {
		c.cfg.Observer.Held(kind, -1)
	}
}

func (c *Consumer) heldMessages() []jetstream.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]jetstream.Msg, 0, len(c.held))
	for m := range c.held {
		out = append(out, m)
	}
	return out
}

func (c *Consumer) heldCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

func (c *Consumer) observe(kind string, a Action) {
	if c.cfg.Observer.Settled != nil {
		c.cfg.Observer.Settled(kind, a)
	}
}
