package runner

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkPollerRound measures one 10 ms scheduling round of a Poller
// watching 10,000 tasks at their steady 5 s interval, with the batches the
// round picks answered by a fake: the Poller's CPU per round, which P3 of
// the harness sees as CPU per second (a round runs every 10 ms while tasks
// are due).
func BenchmarkPollerRound(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := &fakeTasks{}
			cp := newClockPoller(f)
			for i := range n {
				cp.Watch(fmt.Sprintf("t-%d", i), func(PollUpdate) {})
				cp.now = cp.now.Add(5 * time.Second / time.Duration(n))
			}
			cp.run(30 * time.Second) // every task at its 5 s interval
			f.calls = nil
			b.ResetTimer()
			for b.Loop() {
				batches, _ := cp.round(cp.now)
				for _, bt := range batches {
					cp.query(context.Background(), bt)
				}
				cp.now = cp.now.Add(10 * time.Millisecond)
				if len(f.calls) > 1<<16 {
					f.calls = nil // the fake's log of calls is not what is measured
				}
			}
		})
	}
}
