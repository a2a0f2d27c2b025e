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
	if !q.start.IsZero() {
		start := q.start.UTC()
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	cons, err := c.js.CreateConsumer(ctx, q.stream, cfg)
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
	left := cons.CachedInfo().NumPending
	if left == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(int(min(left, 1000))))
	if err != nil {
		return fmt.Errorf("read %s: %w", q.stream, err)
	}
	defer it.Stop()
	for ; left > 0; left-- {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("read %s: %w", q.stream, err)
		}
		if !fn(m) {
			return nil
		}
	}
	return nil
}
