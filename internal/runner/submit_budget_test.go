package runner

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestSubmitAnsweredLateIsRecorded: a paid submit whose answer comes at
// the end of its budget is recorded all the same: the write of its task
// id has a budget of its own, not what the submit left of one.
func TestSubmitAnsweredLateIsRecorded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.r.cfg.SubmitTimeout = 2 * time.Second
	ctx := testenv.Context(t, 30*time.Second)
	j, _, done := b.r.begin(ctx, b.deliver(t, videoSpec("slow-submit", "a paper boat"), 1))
	if done {
		t.Fatal("the delivery did not go on")
	}
	defer j.unregister()
	task, err := b.r.submitMedia(ctx, j, func(ctx context.Context) (*apiclient.Task, error) {
		<-ctx.Done() // the answer arrives as the submit's budget ends
		return &apiclient.Task{RequestID: "req-slow", Output: apiclient.TaskOutput{TaskID: "task-slow", TaskStatus: apiclient.TaskPending}}, nil
	})
	if err != nil || task == nil {
		t.Fatalf("submitMedia = %+v, %v; want the task recorded", task, err)
	}
	if rec := b.record(t, "slow-submit"); rec.Upstream.TaskID != "task-slow" || rec.Submits != 1 {
		t.Fatalf("record %+v, want task-slow recorded after one submit", rec)
	}
}
