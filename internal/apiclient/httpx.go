package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// MaxResponseBytes bounds every JSON response body read by the clients.
// Artifact downloads are streams and are not subject to it.
const MaxResponseBytes = 8 << 20

// ErrResponseTooLarge is returned when a JSON response exceeds
// MaxResponseBytes.
var ErrResponseTooLarge = errors.New("apiclient: response body too large")

// Backoff computes exponential retry delays with full jitter: attempt n
// (0-based) waits a random duration in [Min, min(Max, Min*2^n)].
type Backoff struct {
	// Min is the first delay. Defaults to 200ms.
	Min time.Duration
	// Max caps every delay. Defaults to 10s.
	Max time.Duration
}

// Delay returns the jittered delay before retry number attempt (0-based).
func (b Backoff) Delay(attempt int) time.Duration {
	lo := b.Min
	if lo <= 0 {
		lo = 200 * time.Millisecond
	}
	hi := b.Max
	if hi <= 0 {
		hi = 10 * time.Second
	}
	ceil := lo
	for i := 0; i < attempt && ceil < hi; i++ {
		ceil *= 2
	}
	ceil = min(ceil, hi)
	if ceil <= lo {
		return lo
	}
	return lo + rand.N(ceil-lo+1)
}

// RetryAfter parses a Retry-After header (delta-seconds or HTTP date).
// ok is false when the header is absent or unparseable.
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

// Sleep waits for d or until ctx is done, returning ctx's error in the latter
// case. Clients take it as an injectable func so tests need not sleep.
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

// readBody reads at most MaxResponseBytes of resp's body and always drains
// and closes it, so the connection can be reused.
func readBody(resp *http.Response) ([]byte, error) {
	defer drainClose(resp.Body)
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if len(b) > MaxResponseBytes {
		return nil, ErrResponseTooLarge
	}
	return b, nil
}

// drainClose discards a bounded remainder of body and closes it.
func drainClose(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, body, 64<<10)
	_ = body.Close()
}
