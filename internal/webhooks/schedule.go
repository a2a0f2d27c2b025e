package webhooks

import (
	"math/rand/v2"
	"time"
)

// Schedule is the spacing of a failing destination's attempts: the first
// attempt at once, then these waits, about three days in all (70 h 42 m
// 35 s before jitter). Each wait is jittered by up to ±20 %.
var Schedule = []time.Duration{
	5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute,
	time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 24 * time.Hour,
}

// maxRetryAfter bounds a receiver's Retry-After.
const maxRetryAfter = 24 * time.Hour

// wait is the wait after the n-th consecutive failure (1-based) of a
// destination, or false when the schedule is exhausted. retryAfter, when
// positive, is the receiver's wish (at most maxRetryAfter): the wait is
// never shorter, but never shorter than the schedule's either, or a
// receiver answering "Retry-After: 1" every time would use up the
// three days of attempts in seconds.
func wait(schedule []time.Duration, n int, retryAfter time.Duration) (time.Duration, bool) {
	if n > len(schedule) {
		return 0, false
	}
	return max(min(retryAfter, maxRetryAfter), jitter(schedule[n-1])), true
}

// jitter spreads d by up to ±20 %.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	spread := int64(d) / 5
	return d + time.Duration(rand.Int64N(2*spread+1)-spread)
}

// total is the sum of schedule's waits: how long a delivery is retried.
func total(schedule []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range schedule {
		t += d
	}
	return t
}
