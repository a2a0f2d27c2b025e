package backoff_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

func TestRetryDo(t *testing.T) {
	t.Parallel()
	errBusy := errors.New("busy")
	errBad := errors.New("bad")
	tests := []struct {
		name      string
		retry     backoff.Retry
		fails     int   // op fails this many times, then succeeds
		failWith  error // the error of each failure
		ctxEnds   bool  // ctx ends at the first wait
		wantCalls int
		wantErr   []error
		wantWaits []time.Duration
	}{
		{name: "first try", fails: 0, wantCalls: 1},
		{name: "after three failures", retry: backoff.Retry{Spacing: backoff.Exponential{Min: time.Second, Max: 3 * time.Second}, Jitter: backoff.JitterNone},
			fails: 3, failWith: errBusy, wantCalls: 4, wantWaits: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}},
		{name: "attempts run out", retry: backoff.Retry{Attempts: 2, Jitter: backoff.JitterNone},
			fails: 5, failWith: errBusy, wantCalls: 2, wantErr: []error{errBusy}, wantWaits: []time.Duration{backoff.DefaultMin}},
		{name: "permanent stops at once", fails: 5, failWith: backoff.Permanent(errBad), wantCalls: 1, wantErr: []error{errBad}},
		{name: "an error's own wait", retry: backoff.Retry{Spacing: backoff.Exponential{Min: time.Second}, Jitter: backoff.JitterNone},
			fails: 2, failWith: backoff.After(errBusy, 0), wantCalls: 3, wantWaits: []time.Duration{0, 0}},
		{name: "an error's own wait, attempts run out", retry: backoff.Retry{Attempts: 2},
			fails: 5, failWith: backoff.After(errBusy, time.Minute), wantCalls: 2, wantErr: []error{errBusy}, wantWaits: []time.Duration{time.Minute}},
		{name: "context ends while waiting", fails: 5, failWith: errBusy, ctxEnds: true, wantCalls: 1, wantErr: []error{errBusy, context.Canceled}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var waits []time.Duration
			r := tt.retry
			r.Sleep = func(ctx context.Context, d time.Duration) error {
				waits = append(waits, d)
				if tt.ctxEnds {
					cancel()
				}
				return ctx.Err()
			}
			calls := 0
			err := r.Do(ctx, func(_ context.Context, attempt int) error {
				if attempt != calls {
					t.Errorf("attempt %d, want %d", attempt, calls)
				}
				calls++
				if calls <= tt.fails {
					return tt.failWith
				}
				return nil
			})
			if calls != tt.wantCalls {
				t.Errorf("op called %d times, want %d", calls, tt.wantCalls)
			}
			if len(tt.wantErr) == 0 && err != nil {
				t.Errorf("err = %v, want nil", err)
			}
			for _, want := range tt.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("err = %v, want it to match %v", err, want)
				}
			}
			if tt.wantWaits != nil && !slices.Equal(waits, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", waits, tt.wantWaits)
			}
		})
	}
}

func TestPermanentNil(t *testing.T) {
	t.Parallel()
	if backoff.Permanent(nil) != nil || backoff.After(nil, time.Second) != nil {
		t.Fatal("Permanent(nil) or After(nil) is not nil")
	}
}
