package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/natsconn"
)

// spaceProbeBackoff spaces the looks at JetStream's limits while it
// refuses writes for lack of space.
var spaceProbeBackoff = backoff.Exponential{Min: 500 * time.Millisecond, Max: 10 * time.Second}

// spaceQuiet is how long no write may have been refused before the
// worker takes jobs again: held jobs try their writes at least this often
// (runner's spacing tops out at 10s), so a JetStream still full refuses
// one within it, even when no limit it shows is reached.
const spaceQuiet = 12 * time.Second

// spaceProbeTimeout bounds one look at the limits.
const spaceProbeTimeout = 5 * time.Second

// spaceStreams are the streams the worker writes to: a job needs room in
// each of them to get from its message to its terminal event.
var spaceStreams = []string{
	"KV_" + contract.StateBucket, contract.EventsStream, "KV_" + contract.SpecsBucket, contract.DLQStream,
}

// spaceWatch keeps the worker from taking jobs while JetStream refuses its
// writes for lack of space: a stream it writes to (SLUICE_STATE's,
// SLUICE_EVENTS, ...), the account or the server at its limit. Every loop
// of the reach.Watch reports such a refusal to it (refused). From the
// first, /readyz says why, the consumer pulls nothing and its sweep hands
// no orphan over (spaceWatch is its Gate), and the worker logs once which
// limits are reached; held jobs keep their upstream task and wait for
// space (internal/runner). The watch looks at the limits with backoff and
// takes jobs again once no limit is reached and no write was refused
// since its last look. A full server store shows in no limit: then only
// the refusals stopping tell that space returned.
type spaceWatch struct {
	js   jetstream.JetStream
	next consumer.Gate
	log  zerolog.Logger
	m    *metrics.Metrics
	// wake tells run of a first refusal.
	wake chan struct{}

	mu      sync.Mutex
	full    bool
	since   time.Time
	refusal error     // the last refusal
	loop    string    // the loop that reported it
	at      time.Time // when it came
	limits  []natsconn.Limit
	// limitsErr is why limits is not known (errNotLooked before the
	// first look).
	limitsErr error
}

var errNotLooked = errors.New("not looked at yet")

func newSpaceWatch(log zerolog.Logger, m *metrics.Metrics) *spaceWatch {
	return &spaceWatch{log: log, m: m, wake: make(chan struct{}, 1)}
}

// refused records that loop's write was refused for lack of space.
func (w *spaceWatch) refused(loop string, err error) {
	w.mu.Lock()
	first := !w.full
	w.refusal, w.loop, w.at = err, loop, time.Now()
	if first {
		w.full, w.since, w.limits, w.limitsErr = true, w.at, nil, errNotLooked
	}
	w.mu.Unlock()
	if first {
		w.m.JetStreamOutOfSpace(true)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// run looks at the limits after each first refusal, and then with backoff
// until space returns, until ctx ends.
func (w *spaceWatch) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		w.untilSpace(ctx)
	}
}

// untilSpace says which limits are reached and waits until space returns.
func (w *spaceWatch) untilSpace(ctx context.Context) {
	limits, err := w.reached(ctx)
	w.mu.Lock()
	w.limits, w.limitsErr = limits, err
	refusal, loop := w.refusal, w.loop
	w.mu.Unlock()
	ev := w.log.Warn().Err(refusal).Str("loop", loop)
	if err != nil {
		ev = ev.AnErr("limits_error", err)
	}
	ev.Str("limits", describeLimits(limits, err)).
		Msg("JetStream out of space: taking no new job; held jobs wait for space")
	for attempt := 0; ; attempt++ {
		if backoff.Sleep(ctx, spaceProbeBackoff.Delay(attempt)) != nil {
			return
		}
		limits, err := w.reached(ctx)
		w.mu.Lock()
		if err == nil {
			w.limits, w.limitsErr = limits, nil
		}
		if err == nil && len(limits) == 0 && time.Since(w.at) >= spaceQuiet {
			w.full = false
			since := w.since
			w.mu.Unlock()
			w.m.JetStreamOutOfSpace(false)
			w.log.Info().Dur("waited", time.Since(since).Round(time.Millisecond)).
				Msg("JetStream has space again: taking jobs")
			return
		}
		w.mu.Unlock()
	}
}

// reached returns the limits of the account and of spaceStreams that are
// reached.
func (w *spaceWatch) reached(ctx context.Context) ([]natsconn.Limit, error) {
	ctx, cancel := context.WithTimeout(ctx, spaceProbeTimeout)
	defer cancel()
	return natsconn.ReachedLimits(ctx, w.js, spaceStreams...)
}

// describeLimits names the reached limits for a log line or /readyz.
func describeLimits(limits []natsconn.Limit, err error) string {
	switch {
	case len(limits) > 0:
		s := make([]string, len(limits))
		for i, l := range limits {
			s[i] = l.String()
		}
		return strings.Join(s, "; ")
	case err != nil:
		return "limits unknown: " + err.Error()
	}
	return "no stream or account limit reached: the server's own store (its max_store or its filesystem) is full"
}

// Err says why the worker takes no job for lack of JetStream space, or
// nil.
func (w *spaceWatch) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.full {
		return nil
	}
	return fmt.Errorf("JetStream out of space (%s), taking no jobs: %w", describeLimits(w.limits, w.limitsErr), w.refusal)
}

// Reserve lets no job of kind be pulled or handed over while JetStream
// has no space, else what the next Gate lets.
func (w *spaceWatch) Reserve(kind string, n int) int {
	if w.Err() != nil {
		return 0
	}
	if w.next == nil {
		return n
	}
	return w.next.Reserve(kind, n)
}

// Unreserve hands the next Gate back what it reserved.
func (w *spaceWatch) Unreserve(kind string, n int) {
	if w.next != nil {
		w.next.Unreserve(kind, n)
	}
}
