package webhooks

import (
	"testing"
	"time"
)

// TestEndpointRestsBehindOneProbe: after a failure a destination takes
// nothing until its rest ends; then one probe goes out while the others
// wait, and once it answers 2xx all flow again.
func TestEndpointRestsBehindOneProbe(t *testing.T) {
	t.Parallel()
	e := newEndpoints(2, []time.Duration{10 * time.Second, time.Hour})
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if ok, _, _ := e.admit("a", t0); !ok {
		t.Fatal("a fresh destination refused")
	}
	if rest := e.done("a", false, time.Minute, t0); rest != time.Minute {
		t.Errorf("rest after a Retry-After of 1m: %s", rest)
	}
	if ok, wait, failing := e.admit("a", t0.Add(10*time.Second)); ok || !failing || wait < 50*time.Second || wait > 50*time.Second+spreadWait {
		t.Errorf("resting: admit = %v, %s; want a wait until the rest ends", ok, wait)
	}
	if ok, _, _ := e.admit("b", t0.Add(10*time.Second)); !ok {
		t.Error("another destination waits behind a failing one")
	}
	later := t0.Add(61 * time.Second)
	if ok, _, _ := e.admit("a", later); !ok {
		t.Fatal("no probe once the rest ended")
	}
	if ok, _, _ := e.admit("a", later); ok {
		t.Error("a second delivery went out beside the probe")
	}
	if rest := e.done("a", false, 0, later); rest < 48*time.Minute {
		t.Errorf("rest after the second failure in a row: %s, want the schedule's second step", rest)
	}
	later = later.Add(2 * time.Hour)
	if ok, _, _ := e.admit("a", later); !ok {
		t.Fatal("no second probe")
	}
	e.done("a", true, 0, later)
	for i := range 2 {
		if ok, _, _ := e.admit("a", later); !ok {
			t.Errorf("delivery %d after the probe's 2xx waits", i)
		}
	}
	if ok, _, failing := e.admit("a", later); ok || failing {
		t.Error("more than the bound in flight to one destination, or a busy destination counted as failing")
	}
}

func TestWaitSchedule(t *testing.T) {
	t.Parallel()
	sched := []time.Duration{10 * time.Second, time.Minute}
	for _, c := range []struct {
		n          int
		retryAfter time.Duration
		lo, hi     time.Duration
		more       bool
	}{
		{1, 0, 8 * time.Second, 12 * time.Second, true},
		{2, 0, 48 * time.Second, 72 * time.Second, true},
		{3, 0, 0, 0, false},
		{1, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute, true},
		{1, 48 * time.Hour, maxRetryAfter, maxRetryAfter, true},
	} {
		d, more := wait(sched, c.n, c.retryAfter)
		if more != c.more || d < c.lo || d > c.hi {
			t.Errorf("wait(n=%d, Retry-After %s) = %s, %v; want [%s, %s], %v", c.n, c.retryAfter, d, more, c.lo, c.hi, c.more)
		}
	}
	if got := total(Schedule); got < 70*time.Hour || got > 72*time.Hour {
		t.Errorf("the schedule spans %s, want about three days", got)
	}
}

// TestRetryAfterKeepsTheWholeSchedule: a receiver that answers every
// attempt with a short Retry-After (a rate limiter's 429 with
// "Retry-After: 1") is still retried for the schedule's whole span, about
// three days, not given up after as many seconds as the schedule has
// steps. Its wish is honoured: no attempt comes sooner than it asks.
func TestRetryAfterKeepsTheWholeSchedule(t *testing.T) {
	t.Parallel()
	var spent time.Duration
	for n := 1; ; n++ {
		d, more := wait(Schedule, n, time.Second)
		if !more {
			break
		}
		if d < time.Second {
			t.Errorf("wait after failure %d is %s, sooner than the receiver's Retry-After of 1s", n, d)
		}
		spent += d
	}
	if want := total(Schedule) * 8 / 10; spent < want {
		t.Errorf("a receiver answering Retry-After: 1 is given up after %s of retries, want about %s", spent, total(Schedule))
	}
}
