// Package backoff spaces retries (of the HTTP clients, the job's
// redeliveries, the runner's checkpoints and the worker's NATS dial) and
// holds the rules every client shares for whether one may help: exponential
// delays with or without jitter, the delay a server asks for with
// Retry-After, a wait that ends early with its context, and the draining of
// an answer that will not be read, so that the next attempt can reuse the
// connection.
package backoff

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Defaults of the zero Exponential.
const (
	// DefaultMin is the first delay when Exponential.Min is not positive.
	DefaultMin = 200 * time.Millisecond
	// DefaultMax caps the delays when Exponential.Max is not positive.
	DefaultMax = 10 * time.Second
)

// Exponential describes delays that double from Min up to Max. The zero
// value is ready to use.
type Exponential struct {
	// Min is the first delay. Defaults to 200ms.
	Min time.Duration
	// Max caps every delay; a Max below Min is raised to Min. Defaults to
	// 10s.
	Max time.Duration
}

// Ceiling returns the delay before retry number attempt (0-based) without
// jitter: Min doubled attempt times, capped at Max, never less than Min.
func (e Exponential) Ceiling(attempt int) time.Duration {
	lo, hi := e.bounds()
	d := lo
	for range attempt {
		if d >= hi-d { // doubling reaches the cap; d*2 could overflow
			d = hi
			break
		}
		d *= 2
	}
	return max(min(d, hi), lo)
}

// Delay returns the delay before retry number attempt (0-based) with full
// jitter: a random duration in [Min, Ceiling(attempt)].
func (e Exponential) Delay(attempt int) time.Duration {
	lo, _ := e.bounds()
	ceil := e.Ceiling(attempt)
	if ceil <= lo {
		return lo
	}
	return lo + rand.N(ceil-lo+1)
}

// HalfJitter returns the delay before retry number attempt (0-based) with
// half of it jittered: a random duration in [Ceiling/2, Ceiling]. It suits
// waits that must not fall far below their ceiling, such as a redelivery
// that should not come back almost at once.
func (e Exponential) HalfJitter(attempt int) time.Duration {
	d := e.Ceiling(attempt)
	return d/2 + rand.N(d/2+1)
}

// bounds returns Min and Max with their defaults.
func (e Exponential) bounds() (lo, hi time.Duration) {
	lo, hi = e.Min, e.Max
	if lo <= 0 {
		lo = DefaultMin
	}
	if hi <= 0 {
		hi = DefaultMax
	}
	return lo, hi
}

// RetryAfter parses a Retry-After header, given in delta-seconds or as an
// HTTP date (read against now; a date in the past is zero). ok is false
// when the header is absent or unparseable.
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// RetryableStatus reports whether an HTTP answer with status code may be
// different when asked again: 429 (too many requests) or any 5xx. It is the
// clients' common rule; a caller may add statuses of its own.
func RetryableStatus(code int) bool {
	return code == http.StatusTooManyRequests || code >= 500
}

// RefusedStatus reports whether status code says that the server refused
// the request before acting on it, 429 or 503: even a paid call may be
// repeated, after the answer's Retry-After.
func RefusedStatus(code int) bool {
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
}

// Temporary reports what err says about retrying for itself: the answer of
// the first error in its chain that has a Temporary() bool method. ok is
// false when none has one.
func Temporary(err error) (temporary, ok bool) {
	t, ok := errors.AsType[interface {
		error
		Temporary() bool
	}](err)
	if !ok {
		return false, false
	}
	return t.Temporary(), true
}

// Sleep waits for d or until ctx is done, and returns ctx's error in the
// latter case; a d of zero or less only reports ctx's error. Clients take
// a function of this type as a dependency, so that tests need not sleep.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// maxDrain bounds what DrainClose reads: a longer remainder costs more
// than a new connection.
const maxDrain = 64 << 10

// DrainClose discards at most 64 KiB of what is left of an HTTP response
// body and closes it, so that the connection can be reused by the next
// attempt. A nil body is ignored.
func DrainClose(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, body, maxDrain)
	_ = body.Close()
}
