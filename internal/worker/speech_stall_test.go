package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
)

// A speech stream that goes silent does not hold a stopping worker: the
// stream is closed by the stop's end at the latest (its own stall check,
// a minute by default, may come later), so the worker lets go of the
// connection and its slots.
func TestStalledStreamHonoursAStop(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	stop := b.start(t, func(c *config.Config) { c.ShutdownTimeout = 2 * time.Second })
	text := "goes silent [sim:sse-stall]"
	b.publish(t, "speech", "stall-stop", speechSpec("stall-stop", text, "stream"))
	stalled := func() int64 { return b.media.Counters().Get("streams:stalled") }
	deadline := time.Now().Add(30 * time.Second)
	for stalled() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if stalled() != 1 {
		t.Fatal("the stream never stalled")
	}
	stop()
	deadline = time.Now().Add(20 * time.Second)
	for stalled() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := stalled(); n != 0 {
		t.Errorf("%d stalled stream(s) still open after the worker stopped", n)
	}
}
