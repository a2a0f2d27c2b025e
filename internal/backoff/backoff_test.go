package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

func TestExponentialCeiling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		e       backoff.Exponential
		attempt int
		want    time.Duration
	}{
		{"zero value, first", backoff.Exponential{}, 0, 200 * time.Millisecond},
		{"zero value, third", backoff.Exponential{}, 2, 800 * time.Millisecond},
		{"zero value, capped", backoff.Exponential{}, 10, 10 * time.Second},
		{"doubles", backoff.Exponential{Min: time.Second, Max: 10 * time.Second}, 3, 8 * time.Second},
		{"capped", backoff.Exponential{Min: time.Second, Max: 10 * time.Second}, 4, 10 * time.Second},
		{"odd cap", backoff.Exponential{Min: 2, Max: 5}, 1, 4},
		{"odd cap reached", backoff.Exponential{Min: 2, Max: 5}, 2, 5},
		{"max below min", backoff.Exponential{Min: 5 * time.Second, Max: time.Second}, 3, 5 * time.Second},
		{"negative attempt", backoff.Exponential{Min: time.Second}, -1, time.Second},
		{"no overflow", backoff.Exponential{Min: time.Second, Max: math.MaxInt64}, 200, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := tt.e.Ceiling(tt.attempt); got != tt.want {
			t.Errorf("%s: Ceiling(%d) = %s, want %s", tt.name, tt.attempt, got, tt.want)
		}
	}
}

func TestExponentialDelay(t *testing.T) {
	t.Parallel()
	e := backoff.Exponential{Min: time.Second, Max: 4 * time.Second}
	for attempt := range 5 {
		ceil := e.Ceiling(attempt)
		for range 200 {
			if d := e.Delay(attempt); d < time.Second || d > ceil {
				t.Fatalf("Delay(%d) = %s, want within [1s, %s]", attempt, d, ceil)
			}
		}
	}
	if d := e.Delay(0); d != time.Second {
		t.Errorf("Delay(0) = %s, want Min exactly", d)
	}
}

func TestExponentialHalfJitter(t *testing.T) {
	t.Parallel()
	// The runner's redeliveries: 2s doubling to 5m.
	e := backoff.Exponential{Min: 2 * time.Second, Max: 5 * time.Minute}
	for _, tt := range []struct {
		attempt int
		ceil    time.Duration
	}{{-1, 2 * time.Second}, {0, 2 * time.Second}, {1, 4 * time.Second}, {7, 256 * time.Second}, {8, 5 * time.Minute}, {60, 5 * time.Minute}} {
		var lo, hi time.Duration = tt.ceil, 0
		for range 500 {
			d := e.HalfJitter(tt.attempt)
			if d < tt.ceil/2 || d > tt.ceil {
				t.Fatalf("HalfJitter(%d) = %s, want within [%s, %s]", tt.attempt, d, tt.ceil/2, tt.ceil)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if hi-lo < tt.ceil/8 {
			t.Errorf("HalfJitter(%d) stayed within [%s, %s]: not jittered", tt.attempt, lo, hi)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header string
		want   time.Duration
		ok     bool
	}{
		{"absent", "", 0, false},
		{"seconds", "12", 12 * time.Second, true},
		{"zero", "0", 0, true},
		{"negative", "-3", 0, false},
		{"date", now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{"past date", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"garbage", "soon", 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.header != "" {
			h.Set("Retry-After", tt.header)
		}
		d, ok := backoff.RetryAfter(h, now)
		if d != tt.want || ok != tt.ok {
			t.Errorf("%s: RetryAfter(%q) = %s, %v; want %s, %v", tt.name, tt.header, d, ok, tt.want, tt.ok)
		}
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{-time.Second, 0, time.Hour} {
		if err := backoff.Sleep(done, d); err != context.Canceled {
			t.Errorf("Sleep(cancelled, %s) = %v, want context.Canceled", d, err)
		}
	}
	if err := backoff.Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v", err)
	}
	if err := backoff.Sleep(context.Background(), time.Nanosecond); err != nil {
		t.Errorf("Sleep(1ns) = %v", err)
	}
}

// body records what was read from it and whether it was closed.
type body struct {
	r      io.Reader
	read   int64
	closed bool
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

func (b *body) Close() error { b.closed = true; return nil }

func TestDrainClose(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 1000, 1 << 20} {
		b := &body{r: strings.NewReader(strings.Repeat("x", size))}
		backoff.DrainClose(b)
		if want := min(int64(size), 64<<10); b.read != want || !b.closed {
			t.Errorf("DrainClose(%d bytes): read %d, closed %v; want %d read and closed", size, b.read, b.closed, want)
		}
	}
	backoff.DrainClose(nil) // must not panic
}

func ExampleExponential() {
	e := backoff.Exponential{Min: time.Second, Max: 10 * time.Second}
	var delays []time.Duration
	for attempt := range 5 {
		delays = append(delays, e.Ceiling(attempt))
	}
	fmt.Println(delays)
	// Output: [1s 2s 4s 8s 10s]
}

func TestStatusRules(t *testing.T) {
	t.Parallel()
	for code, want := range map[int][2]bool{
		// code: {RetryableStatus, RefusedStatus}
		200: {false, false}, 301: {false, false}, 400: {false, false}, 401: {false, false},
		404: {false, false}, 408: {false, false}, 422: {false, false},
		429: {true, true}, 500: {true, false}, 502: {true, false}, 503: {true, true}, 504: {true, false},
	} {
		if got := [2]bool{backoff.RetryableStatus(code), backoff.RefusedStatus(code)}; got != want {
			t.Errorf("status %d: RetryableStatus, RefusedStatus = %v, want %v", code, got, want)
		}
	}
}

// sayError says for itself whether a retry may help.
type sayError bool

func (e sayError) Error() string   { return "says " + strconv.FormatBool(bool(e)) }
func (e sayError) Temporary() bool { return bool(e) }

func TestTemporary(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name          string
		err           error
		temporary, ok bool
	}{
		{"nil", nil, false, false},
		{"silent", errors.New("x"), false, false},
		{"says yes", sayError(true), true, true},
		{"says no, wrapped", fmt.Errorf("op: %w", sayError(false)), false, true},
		{"outermost answers", fmt.Errorf("op: %w", fmt.Errorf("%w: %w", sayError(true), sayError(false))), true, true},
	} {
		if temporary, ok := backoff.Temporary(tt.err); temporary != tt.temporary || ok != tt.ok {
			t.Errorf("%s: Temporary = %v, %v; want %v, %v", tt.name, temporary, ok, tt.temporary, tt.ok)
		}
	}
}
