package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// storeProbeEvery is how often a reachable artifact store is probed;
// storeProbeBackoff spaces the probes of one that is away, so that the
// worker takes jobs again within seconds of its return.
const storeProbeEvery = 10 * time.Second

var storeProbeBackoff = backoff.Exponential{Min: 500 * time.Millisecond, Max: 10 * time.Second}

// storeProbeTimeout bounds one probe (the S3 client's own retries
// included).
const storeProbeTimeout = 5 * time.Second

// storeWatch probes the artifact store and keeps the worker from taking
// jobs it could not deliver: while the store does not answer (connection
// refused, DNS, timeouts, credentials refused, bucket missing), /readyz
// says why and the consumer pulls nothing and its sweep hands no orphan
// over (storeWatch is its Gate). Jobs already held go on: they keep their
// upstream task and retry their copies until the store is back. The store
// going away is logged once, and its return once; sluice_s3_waiting shows
// it meanwhile.
type storeWatch struct {
	probe func(context.Context) error
	// where names the store in messages: its endpoint without
	// credentials, and the bucket.
	where string
	next  consumer.Gate
	log   zerolog.Logger
	m     *metrics.Metrics

	mu       sync.Mutex
	err      error // nil: the last probe passed
	since    time.Time
	failures int
}

// check probes the store once and records the outcome.
func (w *storeWatch) check(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, storeProbeTimeout)
	err := w.probe(pctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return err // stopping: not the store's fault
	}
	w.mu.Lock()
	was, since, failures := w.err, w.since, w.failures
	w.err = err
	if err != nil {
		w.failures++
		if was == nil {
			w.since = time.Now()
		}
	} else {
		w.failures = 0
	}
	w.mu.Unlock()
	switch {
	case err != nil:
		w.m.StoreProbeFailed()
		if was == nil {
			w.m.StoreWaiting(true)
			w.log.Warn().Err(err).Str("store", w.where).
				Msg("artifact store unreachable: taking no new job until it answers; held jobs wait for it")
		}
	case was != nil:
		w.m.StoreWaiting(false)
		w.log.Info().Str("store", w.where).Dur("waited", time.Since(since).Round(time.Millisecond)).
			Int("failures", failures).Msg("artifact store reachable again: taking jobs")
	}
	return err
}

// run probes the store until ctx ends: every storeProbeEvery while it
// answers, with backoff while it does not.
func (w *storeWatch) run(ctx context.Context) {
	for attempt := 0; ; {
		w.mu.Lock()
		away := w.err != nil
		w.mu.Unlock()
		delay := storeProbeEvery
		if away {
			delay = storeProbeBackoff.Delay(attempt)
			attempt++
		} else {
			attempt = 0
		}
		if backoff.Sleep(ctx, delay) != nil {
			return
		}
		_ = w.check(ctx)
	}
}

// Err says why the worker takes no job because of its store, or nil.
func (w *storeWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		return nil
	}
	return fmt.Errorf("artifact store unreachable (%s), taking no jobs: %w", w.where, w.err)
}

// Reserve lets no job of kind be pulled or handed over while the store is
// away, else what the next Gate (the fleet's quotas) lets.
func (w *storeWatch) Reserve(kind string, n int) int {
	if w.Err() != nil {
		return 0
	}
	if w.next == nil {
		return n
	}
	return w.next.Reserve(kind, n)
}

// Unreserve hands the next Gate back what it reserved.
func (w *storeWatch) Unreserve(kind string, n int) {
	if w.next != nil {
		w.next.Unreserve(kind, n)
	}
}
