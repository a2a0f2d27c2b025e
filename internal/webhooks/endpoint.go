package webhooks

import (
	"math/rand/v2"
	"sync"
	"time"
)

// endpoints is this worker's view of each destination: how many of its
// deliveries are in flight, and, while it fails, until when it rests.
// A failing destination gets one probe per step of the schedule; the
// deliveries behind it wait (a delayed Nak) until the step ends, and once
// the probe answers 2xx they all flow again. Each worker keeps its own
// view: with N workers a failing destination sees up to N probes a step.
type endpoints struct {
	mu       sync.Mutex
	m        map[string]*endpoint
	limit    int
	schedule []time.Duration
}

type endpoint struct {
	inflight int
	failures int
	until    time.Time
	probing  bool
}

// Waits of a delivery that is not sent now.
const (
	// busyWait: the destination has its bound of deliveries in flight.
	busyWait = 500 * time.Millisecond
	// probeWait: the destination's probe is still out.
	probeWait = 5 * time.Second
	// spreadWait spreads the deliveries parked behind a failing
	// destination over the moments after its step ends.
	spreadWait = 2 * time.Second
)

func newEndpoints(limit int, schedule []time.Duration) *endpoints {
	return &endpoints{m: map[string]*endpoint{}, limit: limit, schedule: schedule}
}

// admit says whether a delivery to key may be sent at now; if not, how
// long it should wait before asking again, and whether because the
// destination is failing (resting or probing) rather than busy.
func (e *endpoints) admit(key string, now time.Time) (ok bool, wait time.Duration, failing bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep := e.m[key]
	if ep == nil {
		ep = &endpoint{}
		e.m[key] = ep
	}
	switch {
	case ep.failures > 0 && now.Before(ep.until):
		return false, ep.until.Sub(now) + randUpTo(spreadWait), true
	case ep.failures > 0 && ep.probing:
		return false, jitter(probeWait), true
	case ep.failures > 0:
		ep.probing = true
	case ep.inflight >= e.limit:
		return false, jitter(busyWait), false
	}
	ep.inflight++
	return true, 0, false
}

// done records the outcome of a delivery admit let through: ok, or a
// failure after which the destination rests for the schedule's step of
// its failures in a row (the last step once past the end), or for the
// receiver's retryAfter when given; it returns the rest.
func (e *endpoints) done(key string, ok bool, retryAfter time.Duration, now time.Time) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	ep := e.m[key]
	ep.inflight--
	ep.probing = false
	var rest time.Duration
	if ok {
		ep.failures, ep.until = 0, time.Time{}
	} else {
		ep.failures++
		rest, _ = wait(e.schedule, min(ep.failures, len(e.schedule)), retryAfter)
		ep.until = now.Add(rest)
	}
	if ep.inflight == 0 && ep.failures == 0 {
		delete(e.m, key)
	}
	return rest
}

// failures is how many deliveries to key failed in a row.
func (e *endpoints) failures(key string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ep := e.m[key]; ep != nil {
		return ep.failures
	}
	return 0
}

func randUpTo(d time.Duration) time.Duration { return time.Duration(rand.Int64N(int64(d) + 1)) }
