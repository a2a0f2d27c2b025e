package runner

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestCollectingClearsTheLastError moves a job whose poll failed (a last
// error at "running") to "collecting" by showCollecting's write: the
// running step succeeded, so the record no longer shows its error.
func TestCollectingClearsTheLastError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	id := "collecting-last-error"
	b.write(t, id, func(rec *state.Record) {
		now := time.Now().UTC()
		rec.Kind, rec.Status, rec.Attempts, rec.Submits = "video", state.StatusRunning, 1, 1
		rec.Upstream.TaskID, rec.SubmittedAt = "task-1", &now
		rec.LastError = &state.StepError{Step: state.StatusRunning, Message: "poll: connection refused", Since: now, At: now}
	})
	j, _, done := b.r.begin(ctx, b.deliver(t, videoSpec(id, "a paper boat"), 2))
	if done {
		t.Fatal("the delivery did not go on")
	}
	defer j.unregister()
	if j.rec.LastError == nil {
		t.Fatalf("begin dropped the last error of the step it resumes: %+v", j.rec)
	}
	copying, stop := b.r.showCollecting(ctx, j)
	copying()
	b.waitStatus(t, id, state.StatusCollecting)
	stop()
	if rec := b.record(t, id); rec.LastError != nil {
		t.Fatalf("record at collecting keeps the running step's error %+v", rec.LastError)
	}
}
