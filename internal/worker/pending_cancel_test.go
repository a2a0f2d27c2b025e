package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// A cancel of an id no worker had seen stops a job with that id published
// within state.PendingCancelTTL, and not one published long after (the
// cancel was of a mistyped id, not of this job).
func TestPendingCancelExpires(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := testenv.Context(t, 10*time.Second)
	if err := contract.Ensure(ctx, b.nats.JS, contract.Options{AckWait: b.cfg.AckWait}); err != nil {
		t.Fatal(err)
	}
	pending := func(id string, at time.Time) {
		_, err := state.NewStore(b.kv(t), "enqueue", func() time.Time { return at }).RequestCancel(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
	}
	pending("cancel-fresh", time.Now())
	pending("cancel-stale", time.Now().Add(-state.PendingCancelTTL-time.Minute))
	b.start(t)
	b.publish(t, "video", "cancel-fresh", videoSpec("cancel-fresh", "cancelled before it was published"))
	b.publish(t, "video", "cancel-stale", videoSpec("cancel-stale", "published long after a cancel of its id"))

	if ev := b.await(t, "cancel-fresh", 30*time.Second); ev.Data.Status != "cancelled" {
		t.Errorf("cancel-fresh: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("cancelled before it was published"); n != 0 {
		t.Errorf("cancel-fresh submitted %d times", n)
	}
	if ev := b.await(t, "cancel-stale", 30*time.Second); ev.Data.Status != "succeeded" {
		t.Errorf("cancel-stale: %s %+v", ev.Data.Status, ev.Data.Error)
	}
}
