package natsconn

import (
	"context"
	"testing"
	"time"
)

// TestBoundedCapsEveryContext: a request is bounded by RequestTimeout
// whatever deadline its caller's context carries (a speech stream's is
// the task timeout, hours), and by the caller's own when that is sooner.
func TestBoundedCapsEveryContext(t *testing.T) {
	for _, tc := range []struct {
		name   string
		within time.Duration
		want   time.Duration
	}{
		{"no deadline", 0, RequestTimeout},
		{"a deadline hours away", 6 * time.Hour, RequestTimeout},
		{"a deadline sooner", time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.within > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.within)
				defer cancel()
			}
			bctx, cancel := Bounded(ctx)
			defer cancel()
			d, ok := bctx.Deadline()
			if !ok {
				t.Fatal("no deadline")
			}
			if left := time.Until(d); left > tc.want {
				t.Errorf("bounded to %v from now, want at most %v", left, tc.want)
			}
		})
	}
}
