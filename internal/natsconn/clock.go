package natsconn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Clock is a key-value bucket's server's clock as one worker reads it.
// Times a worker stores for the others (a record's, a quota board's) and
// compares with theirs are on it, so the workers' own clocks may disagree
// by any amount: a worker whose clock is behind writes the same times as
// one whose clock is right.
//
// It asks the server for its time (the stream info of the bucket, which
// the stream's leader stamps) and goes on from there on the worker's
// clock, measuring only the time elapsed since, which is the monotonic
// clock's: a worker's wall clock that is off, or is stepped, moves
// nothing. The reading is the server's time when the answer left it, taken
// as the time the answer arrived, so the clock runs behind the server's
// by at most one round trip: a lease this worker writes expires up to
// that much early, and one it reads up to that much late. It asks again
// every resyncEvery, which follows a stream leader moving to a server
// whose clock differs (NATS servers are assumed to keep time among
// themselves, as JetStream's own MaxAge does).
type Clock struct {
	serverTime func(ctx context.Context) (time.Time, error)
	local      func() time.Time
	log        zerolog.Logger

	mu sync.Mutex
	// server was the server's time at local reading at.
	server, at time.Time
	// synced is when (time.Now, for its monotonic reading) it last asked.
	synced time.Time
	warned bool
}

// resyncEvery is how often a Clock asks the server for its time again.
const resyncEvery = 5 * time.Minute

// NewClock returns the clock of kv's server; local is the worker's own
// clock (time.Now when nil), of which only elapsed times are used.
func NewClock(kv jetstream.KeyValue, local func() time.Time, log zerolog.Logger) *Clock {
	if local == nil {
		local = time.Now
	}
	return &Clock{serverTime: func(ctx context.Context) (time.Time, error) { return ServerTime(ctx, kv) }, local: local, log: log}
}

// ErrNoServerTime is returned by ServerTime when the server does not say
// its time (nats-server before 2.10).
var ErrNoServerTime = errors.New("natsconn: the NATS server does not report its time (nats-server 2.10 or later does)")

// ServerTime is kv's server's time now: the time its stream's leader
// stamped on the bucket's stream info.
func ServerTime(ctx context.Context, kv jetstream.KeyValue) (time.Time, error) {
	st, err := kv.Status(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the time of bucket %s's server: %w", kv.Bucket(), err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok || bs.StreamInfo() == nil || bs.StreamInfo().TimeStamp.IsZero() {
		return time.Time{}, ErrNoServerTime
	}
	return bs.StreamInfo().TimeStamp, nil
}

// Sync asks the server for its time unless it did within resyncEvery.
// A server that does not report its time leaves the clock on the
// worker's own (said once in the log): the times stored are then as good
// as the workers' clocks agree.
func (c *Clock) Sync(ctx context.Context) error {
	c.mu.Lock()
	fresh := !c.synced.IsZero() && time.Since(c.synced) < resyncEvery
	c.mu.Unlock()
	if fresh {
		return nil
	}
	ts, err := c.serverTime(ctx)
	at := c.local()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case errors.Is(err, ErrNoServerTime):
		if !c.warned {
			c.warned = true
			c.log.Warn().Err(err).Msg("the times this worker stores are on its own clock: keep the workers' clocks in step (NTP)")
		}
		c.server, c.at = at, at
	case err != nil:
		return err
	default:
		c.server, c.at = ts, at
	}
	c.synced = time.Now()
	return nil
}

// Now is the server's time now, as far as this worker knows it; before
// the first Sync, the worker's own clock.
func (c *Clock) Now() time.Time {
	now := c.local()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() {
		return now
	}
	return c.server.Add(now.Sub(c.at))
}

// Run keeps the clock in step with the server until ctx ends: it asks
// again every resyncEvery, and every few seconds while the server does
// not answer.
func (c *Clock) Run(ctx context.Context) {
	for {
		wait := resyncEvery
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := c.Sync(sctx); err != nil {
			wait = 5 * time.Second
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
