package natsconn_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestClockFollowsTheServer: a worker whose clock is ten minutes behind,
// or ahead, reads the server's time, and goes on from it.
func TestClockFollowsTheServer(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := n.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "CLOCK"})
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []time.Duration{-10 * time.Minute, 90 * time.Second} {
		c := natsconn.NewClock(kv, func() time.Time { return time.Now().Add(off) }, zerolog.Nop())
		if d := c.Now().Sub(time.Now()); d < off-time.Second || d > off+time.Second {
			t.Fatalf("offset %s: before its first sync the clock is the worker's own; it is %s off", off, d)
		}
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		// The embedded server's clock is this process's.
		if d := time.Since(c.Now()); d < 0 || d > 2*time.Second {
			t.Fatalf("offset %s: the clock is %s behind the server's, want within a round trip", off, d)
		}
	}
}
