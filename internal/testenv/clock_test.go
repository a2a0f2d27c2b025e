package testenv_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestSleeper(t *testing.T) {
	t.Parallel()
	clock := testenv.NewClock()
	start := clock.Now()
	s := &testenv.Sleeper{Clock: clock}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var hooked []int
	s.OnWait(func(n int) {
		hooked = append(hooked, n)
		if n == 2 {
			cancel()
		}
	})
	if err := s.Sleep(ctx, time.Second); err != nil {
		t.Fatalf("first Sleep = %v", err)
	}
	if err := s.Sleep(ctx, time.Minute); err != context.Canceled {
		t.Fatalf("Sleep whose hook cancels = %v, want context.Canceled", err)
	}
	if err := s.Sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("Sleep on a done context = %v, want context.Canceled", err)
	}
	if got, want := s.Waits(), []time.Duration{time.Second, time.Minute}; !slices.Equal(got, want) {
		t.Errorf("Waits = %v, want %v (a done context records nothing)", got, want)
	}
	if !slices.Equal(hooked, []int{1, 2}) {
		t.Errorf("hook ran for %v, want [1 2]", hooked)
	}
	if got := clock.Now().Sub(start); got != time.Minute+time.Second {
		t.Errorf("clock advanced by %s, want 1m1s", got)
	}

	var plain testenv.Sleeper // no clock: records only
	if err := plain.Sleep(context.Background(), time.Hour); err != nil || len(plain.Waits()) != 1 {
		t.Errorf("zero Sleeper: %v, waits %v", err, plain.Waits())
	}
}
