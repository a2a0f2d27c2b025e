package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
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

// A worker killed after it recorded a synchronous speech answer without
// output.task_id, while it copies the audio: the next delivery collects
// the recorded results and never synthesizes (pays) again.
func TestCrashAfterSyncSpeechWithoutTaskIDCollects(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// Result downloads hang long enough to kill the worker mid-copy.
	b.media.Faults().Set(apisim.EndpointResult, apisim.Fault{Latency: 30 * time.Second})
	first := b.spawn(t, "doomed")
	text := "sync without id, then a crash [sim:no-task-id]"
	b.publish(t, "speech", "sync-noid-crash", speechSpec("sync-noid-crash", text, "sync"))
	b.awaitRecord(t, "sync-noid-crash", 30*time.Second, func(r *state.Record) bool { return len(r.Results) > 0 })
	first.kill(t)
	b.media.Faults().Reset()

	b.spawn(t, "heir")
	ev := b.await(t, "sync-noid-crash", 2*time.Minute)
	if ev.Data.Status != string(state.StatusSucceeded) || len(ev.Data.Artifacts) == 0 {
		t.Fatalf("event %s %+v, want succeeded with the audio", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(text); n != 1 {
		t.Errorf("submits = %d, want 1: the heir synthesized again", n)
	}
}
