package worker_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/state"
)

// With fair scheduling on, jobs go through admission to their class queue
// and run as before: the job keeps its id (the spec's, the message's or
// js-<sequence of the message the producer published>), its events and
// record are the same, and a job that cannot run is dead-lettered under
// that id.
func TestFairSchedulingRunsJobsUnderTheirIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.Order = &order.Static{On: true} })
	b.publish(t, "video", "fair-1", videoSpec("fair-1", "a fair boat"))
	seq := b.publish(t, "speech", "", "this is not json")

	ev := b.await(t, "fair-1", 30*time.Second)
	if ev.Data.Status != "succeeded" || ev.ID != "fair-1.succeeded" {
		t.Fatalf("fair-1: terminal event %+v", ev)
	}
	if rec := b.record(t, "fair-1"); rec.Status != state.StatusSucceeded || rec.Submits != 1 {
		t.Errorf("fair-1: record %+v", rec)
	}
	bad := b.await(t, "js-"+strconv.FormatUint(seq, 10), 30*time.Second)
	if bad.Data.Status != "failed" || bad.Data.Error == nil || bad.Data.Error.Code != "invalid_spec" {
		t.Fatalf("not-JSON job js-%d: %+v", seq, bad.Data)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var letters []string
		for _, m := range b.deadLetters(t) {
			letters = append(letters, m.Subject+"|"+m.Header.Get(contract.HeaderJobID))
		}
		if strings.Contains(strings.Join(letters, " "), "sluice.dlq.speech|js-"+strconv.FormatUint(seq, 10)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters %v lack the not-JSON job js-%d", letters, seq)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
