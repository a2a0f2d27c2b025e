package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/state"
)

// A synchronous speech answer carries its results, and maybe no
// output.task_id: it is recorded all the same, so that a delivery after a
// copy that failed collects the results instead of synthesizing (paying)
// again.
func TestSyncSpeechWithoutTaskIDIsCheckpointed(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	text := "sync without id [sim:no-task-id] [sim:result-url=http://127.0.0.1:1/gone.mp3]"
	b.start(t)
	b.publish(t, "speech", "sync-noid", speechSpec("sync-noid", text, "sync"))
	rec := b.awaitRecord(t, "sync-noid", time.Minute, func(r *state.Record) bool { return r.Attempts >= 3 || r.Status.Terminal() })
	if n := b.media.SubmitCount(text); n != 1 {
		t.Errorf("submits = %d after %d deliveries, want 1: a delivery synthesized again", n, rec.Attempts)
	}
	if len(rec.Results) == 0 {
		t.Errorf("record %+v does not keep the synthesis' results", rec)
	}
}
