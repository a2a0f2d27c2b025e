package runner

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestCancelAnsweredRunningIsAskedAgain: a cancel that upstream answers
// with the task still running did not cancel it: the job polls on and
// asks again, and ends cancelled only once upstream says the task is.
func TestCancelAnsweredRunningIsAskedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "cancel-answered-running"
	prompt := "a paper boat [sim:duration=1h] [sim:cancel-running]"
	out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliver(t, videoSpec(id, prompt), 1))
	if out.Action != consumer.Detach {
		t.Fatalf("Handle settled %v, want a detached wait", out.Action)
	}
	b.waitStatus(t, id, state.StatusRunning)
	b.cancel(t, id)
	rec := b.waitEnd(t, id)
	task, err := b.client.GetTask(testenv.Context(t, 10*time.Second), rec.Upstream.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != state.StatusCancelled || rec.Upstream.Status != "cancelled" || task.Output.TaskStatus != apiclient.TaskCancelled {
		t.Fatalf("record %+v, task upstream %s: want cancelled upstream and here", rec, task.Output.TaskStatus)
	}
}

// TestCancelOfATaskUpstreamForgot: a cancel answered 404 (upstream no
// longer knows the task) ends the job as a poll answered 404 does,
// failed upstream_failed, instead of sending it back to be redelivered
// and ask again for ever.
func TestCancelOfATaskUpstreamForgot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "cancel-forgotten"
	b.write(t, id, func(r *state.Record) {
		now := time.Now().UTC()
		r.JobID, r.Kind, r.Status, r.Attempts, r.Submits, r.SubmittedAt = id, "video", state.StatusSubmitted, 1, 1, &now
		r.Upstream = state.Upstream{TaskID: "vt-forgotten-000001", Status: string(apiclient.TaskPending)}
	})
	b.cancel(t, id)
	b.r.Handle(testenv.Context(t, 30*time.Second), b.deliver(t, videoSpec(id, "a paper boat"), 2))
	rec := b.waitEnd(t, id)
	if rec.Status != state.StatusFailed || rec.Error == nil || rec.Error.Code != CodeUpstreamFailed {
		t.Fatalf("record %+v (error %+v), want failed %s", rec, rec.Error, CodeUpstreamFailed)
	}
}
