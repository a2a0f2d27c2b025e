package webhooks

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// consumer looks up the durable name on stream, again with backoff while
// JetStream does not answer, until ctx ends.
func consumer(ctx context.Context, js jetstream.JetStream, stream, name string, log zerolog.Logger) (jetstream.Consumer, error) {
	spacing := backoff.Exponential{Min: 500 * time.Millisecond, Max: 10 * time.Second}
	for failures := 1; ; failures++ {
		c, err := js.Consumer(ctx, stream, name)
		if err == nil {
			return c, nil
		}
		if failures == 1 {
			log.Warn().Err(err).Str("consumer", name).Msg("webhooks: cannot open consumer; retrying")
		}
		if err := backoff.Sleep(ctx, spacing.HalfJitter(failures)); err != nil {
			return nil, err
		}
	}
}

// pull fetches from cons only as many messages as slots are free (a
// fetched message's ack wait runs from its delivery) and handles each in
// its own goroutine, until ctx ends.
func pull(ctx context.Context, cons jetstream.Consumer, slots int, log zerolog.Logger, handle func(context.Context, jetstream.Msg)) error {
	free := make(chan struct{}, slots)
	for range slots {
		free <- struct{}{}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	spacing := backoff.Exponential{Min: 100 * time.Millisecond, Max: 5 * time.Second}
	failures := 0
	for {
		n, err := take(ctx, free)
		if err != nil {
			return nil
		}
		batch, err := cons.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			give(free, n)
			failures++
			log.Debug().Err(err).Msg("webhooks: fetch failed")
			if backoff.Sleep(ctx, spacing.HalfJitter(failures)) != nil {
				return nil
			}
			continue
		}
		failures = 0
		got := 0
		for msg := range batch.Messages() {
			got++
			wg.Go(func() {
				defer give(free, 1)
				handle(ctx, msg)
			})
		}
		give(free, n-got)
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			log.Debug().Err(err).Msg("webhooks: fetch ended with an error")
		}
	}
}

// take waits for one free slot and takes every other free one too.
func take(ctx context.Context, free chan struct{}) (int, error) {
	select {
	case <-free:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	n := 1
	for {
		select {
		case <-free:
			n++
		default:
			return n, nil
		}
	}
}

func give(free chan struct{}, n int) {
	for range n {
		free <- struct{}{}
	}
}
