// Package consumer takes job messages from the contract's durable pull
// consumers and settles them: it pulls only for free slots, keeps every held
// message's lease alive with InProgress heartbeats, hands each message to a
// Handler, and turns the Handler's Outcome into Ack, NakWithDelay, Nak or a
// dead letter plus Term. It knows nothing of what a job does.
package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/contract"
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
}

// Delivery is one delivered job message.
type Delivery struct {
	// Kind is the kind served by the consumer that delivered it.
	Kind     string
	Msg      jetstream.Msg
	Meta     *jetstream.MsgMetadata
	stopping <-chan struct{}
}

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

// StreamSeq is the message's sequence in SLUICE_JOBS.
func (d *Delivery) StreamSeq() uint64 {
	if d.Meta == nil {
		return 0
	}
	return d.Meta.Sequence.Stream
}

// Handler runs one job. Handle must return an Outcome for every message;
// ctx ends only when the graceful stop's deadline has passed.
type Handler interface {
	Handle(ctx context.Context, d *Delivery) Outcome
}

// Observer receives the consumer's measurements; nil fields are skipped.
type Observer struct {
	Held    func(kind string, delta int)
	Settled func(kind string, a Action)
}

// Config configures a Consumer.
type Config struct {
	// JS is the JetStream context. Required.
	JS jetstream.JetStream
	// Kinds are the kinds served. Required.
	Kinds []string
	// MaxInflight is the most jobs of one kind held at once. Defaults to 256.
	MaxInflight int
	// AckWait is the consumers' AckWait; heartbeats go out every quarter of
	// it. Defaults to 60s.
	AckWait time.Duration
	// FetchWait is how long one pull request waits for messages. Defaults
	// to 2s.
	FetchWait time.Duration
	// ShutdownTimeout bounds a graceful stop. Defaults to 30s.
	ShutdownTimeout time.Duration
	// Logger defaults to a disabled logger.
	Logger *zerolog.Logger
	// Observer is optional.
	Observer Observer
}

func (c Config) withDefaults() Config {
	c.MaxInflight = cmp.Or(c.MaxInflight, 256)
	c.AckWait = cmp.Or(c.AckWait, 60*time.Second)
	c.FetchWait = cmp.Or(c.FetchWait, 2*time.Second)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, 30*time.Second)
	if c.Logger == nil {
		l := zerolog.Nop()
		c.Logger = &l
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

	cons := make(map[string]jetstream.Consumer, len(c.cfg.Kinds))
	for _, kind := range c.cfg.Kinds {
		cn, err := c.cfg.JS.Consumer(ctx, contract.JobsStream, contract.ConsumerName(kind))
		if err != nil {
			return fmt.Errorf("bind consumer %s: %w", contract.ConsumerName(kind), err)
		}
		cons[kind] = cn
	}

	var fetchers sync.WaitGroup
	for kind, cn := range cons {
		fetchers.Go(func() { c.fetchLoop(ctx, handlerCtx, kind, cn) })
	}
	hbDone := make(chan struct{})
	go c.heartbeats(hbDone)

	<-ctx.Done()
	deadline := time.After(c.cfg.ShutdownTimeout * 9 / 10)
	close(c.stopping)
	c.log.Info().Int("held", c.heldCount()).Msg("stopping: releasing held jobs")
	fetchers.Wait()
	close(c.pullsDone)

	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-deadline:
		c.log.Warn().Int("held", c.heldCount()).Msg("shutdown timeout: handing back jobs still running")
		for _, m := range c.heldMessages() {
			_ = m.Nak()
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

// fetchLoop pulls at most as many messages as kind has free slots, so no
// message waits in a client buffer while its AckWait runs.
func (c *Consumer) fetchLoop(ctx, handlerCtx context.Context, kind string, cn jetstream.Consumer) {
	slots := make(chan struct{}, c.cfg.MaxInflight)
	backoff := 100 * time.Millisecond
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		free := 1
		for free < c.cfg.MaxInflight {
			select {
			case slots <- struct{}{}:
				free++
				continue
			default:
			}
			break
		}
		batch, err := cn.Fetch(free, jetstream.FetchMaxWait(c.cfg.FetchWait))
		if err != nil {
			for range free {
				<-slots
			}
			if ctx.Err() != nil {
				return
			}
			c.log.Warn().Err(err).Str("kind", kind).Dur("retry_in", backoff).Msg("fetch failed")
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		got := 0
		for msg := range batch.Messages() {
			got++
			c.hold(msg, kind)
			c.wg.Go(func() {
				defer func() { <-slots }()
				c.handle(handlerCtx, kind, msg)
			})
		}
		for range free - got {
			<-slots
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			c.log.Debug().Err(err).Str("kind", kind).Msg("fetch ended")
		}
	}
}

func (c *Consumer) handle(ctx context.Context, kind string, msg jetstream.Msg) {
	defer c.release(msg)
	select {
	case <-c.stopping:
		c.awaitPulls()
		_ = msg.Nak()
		c.observe(kind, Release)
		return
	default:
	}
	meta, _ := msg.Metadata()
	d := &Delivery{Kind: kind, Msg: msg, Meta: meta, stopping: c.stopping}
	out := c.safeHandle(ctx, d)
	c.settle(ctx, d, out)
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
		err = msg.Ack()
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
// AckWait, so a job's lease outlives any wait while its worker lives, and
// lapses soon after the worker dies.
func (c *Consumer) heartbeats(done <-chan struct{}) {
	t := time.NewTicker(c.cfg.AckWait / 4)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			for _, m := range c.heldMessages() {
				if err := m.InProgress(); err != nil {
					c.log.Debug().Err(err).Msg("heartbeat failed")
				}
			}
		}
	}
}

func (c *Consumer) hold(m jetstream.Msg, kind string) {
	c.mu.Lock()
	c.held[m] = kind
	c.mu.Unlock()
	if c.cfg.Observer.Held != nil {
		c.cfg.Observer.Held(kind, 1)
	}
}

func (c *Consumer) release(m jetstream.Msg) {
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
