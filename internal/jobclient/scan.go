package jobclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// query selects messages of a stream: those on any of subjects stored at
// or after start (from the first message when start is zero).
type query struct {
	stream   string
	subjects []string
	start    time.Time
	// startSeq, when set, starts at this stream sequence instead.
	startSeq uint64
	// headersOnly leaves the bodies on the server.
	headersOnly bool
}

// consumer creates the ephemeral consumer of q. It is removed by the
// caller, or by the server after a minute without use if the caller dies.
func (c *Client) consumer(ctx context.Context, q query) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		FilterSubjects:    q.subjects,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		HeadersOnly:       q.headersOnly,
		MemoryStorage:     true,
		InactiveThreshold: time.Minute,
	}
	switch {
	case q.startSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, q.startSeq
	case !q.start.IsZero():
		start := q.start.UTC()
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	// A user whose permissions leave the stream out is refused with an
	// asynchronous error only; without the watch the request would wait
	// for its timeout.
	api := "$JS.API.CONSUMER.CREATE." + q.stream
	rctx, stop := c.refusable(ctx, api, api+".>")
	defer stop()
	cons, err := c.js.CreateConsumer(rctx, q.stream, cfg)
	if refused := refusedBy(rctx); refused != nil {
		return nil, &ReadRefusedError{Stream: q.stream, Err: refused}
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w (stream %s does not exist)", ErrNotSetUp, q.stream)
	}
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("read %s: %w", q.stream, err))
	}
	return cons, nil
}

func (c *Client) dropConsumer(q query, cons jetstream.Consumer) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.js.DeleteConsumer(ctx, q.stream, cons.CachedInfo().Name)
}

// count returns how many messages q selects, without reading them: the
// server counts them when the consumer is created.
func (c *Client) count(ctx context.Context, q query) (uint64, error) {
	cons, err := c.consumer(ctx, q)
	if err != nil {
		return 0, err
	}
	defer c.dropConsumer(q, cons)
	return cons.CachedInfo().NumPending, nil
}

// scan calls fn with every message q selects that the stream held when
// scan started, oldest first, until fn returns false. The filtering by
// subject and start time happens on the server: scan reads only what it
// selects.
func (c *Client) scan(ctx context.Context, q query, fn func(jetstream.Msg) bool) error {
	cons, err := c.consumer(ctx, q)
	if err != nil {
		return err
	}
	defer c.dropConsumer(q, cons)
	return c.read(ctx, q, cons, fn)
}

// read is scan with the consumer of q made already.
func (c *Client) read(ctx context.Context, q query, cons jetstream.Consumer, fn func(jetstream.Msg) bool) error {
	left := cons.CachedInfo().NumPending
	for left > 0 {
		// One pull for the whole batch: cheaper than the streaming
		// iterator's many small ones.
		batch, err := cons.Fetch(int(min(left, scanBatch)), jetstream.FetchContext(ctx))
		if err != nil {
			return fmt.Errorf("read %s: %w", q.stream, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			if !fn(m) {
				return nil
			}
		}
		if err := batch.Error(); err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("read %s: %w", q.stream, err)
		}
		if got == 0 {
			return nil // the rest went away (a work queue acked, a limit)
		}
		left -= uint64(min(uint64(got), left))
	}
	return nil
}

// scanBatch is the most messages scan asks for at once.
const scanBatch = 10000
