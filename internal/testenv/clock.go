package testenv

import (
	"context"
	"sync"
	"time"
)

// Clock is a settable clock to inject wherever a component reads the time,
// so that a test moves time on by hand instead of waiting. It is safe for
// concurrent use; the zero value reads the zero time (see NewClock).
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock reading 2026-11-22 10:00 UTC.
func NewClock() *Clock {
	return &Clock{t: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Sleeper stands in for a sleep function (see its Sleep method): it
// records each wait instead of waiting, moves Clock on by it when Clock is
// set, then runs the hook set with OnWait. It is safe for concurrent use;
// the zero value records without moving a clock.
type Sleeper struct {
	// Clock, when set, is advanced by every wait.
	Clock *Clock

	mu    sync.Mutex
	waits []time.Duration
	hook  func(n int)
}

// Sleep returns ctx's error at once when ctx is done; otherwise it records
// d, advances the Clock, runs the hook with the wait's 1-based number and
// returns ctx's error (the hook may cancel ctx).
func (s *Sleeper) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	s.waits = append(s.waits, d)
	n, hook := len(s.waits), s.hook
	s.mu.Unlock()
	if s.Clock != nil {
		s.Clock.Advance(d)
	}
	if hook != nil {
		hook(n)
	}
	return ctx.Err()
}

// Waits returns the waits recorded so far, in order.
func (s *Sleeper) Waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// OnWait sets the hook run after every wait with its 1-based number; nil
// removes it.
func (s *Sleeper) OnWait(hook func(n int)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = hook
}
