package runner

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
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

// TestPollerAsksABadElementsTaskAlone: a batch answer with one malformed
// element still tells every other task of the batch its state, and tells
// the task whose element is bad to ask alone (an error update), at once.
func TestPollerAsksABadElementsTaskAlone(t *testing.T) {
	t.Parallel()
	sim := apisim.NewMedia(apisim.MediaConfig{APIKey: "test-key", TaskDuration: time.Hour})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	client, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: srv.URL, APIKey: "test-key"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 30*time.Second)
	cp := newClockPoller(client)
	var logs []func() []PollUpdate
	for _, p := range []string{"good", "bad [sim:bad-element]", "good too"} {
		task, err := client.SubmitVideo(ctx, apiclient.VideoRequest{Model: "video-model", Input: apiclient.VideoInput{Prompt: p},
			Parameters: apiclient.VideoParameters{Resolution: "768P", Duration: 5, Ratio: "16:9"}})
		if err != nil {
			t.Fatal(err)
		}
		updates, stop := cp.watchLog(task.Output.TaskID)
		defer stop()
		logs = append(logs, updates)
	}
	cp.run(1100 * time.Millisecond) // one round, all three in its batch
	for i, updates := range logs {
		got := updates()
		if len(got) != 1 {
			t.Fatalf("task %d: %d updates after one round, want 1", i, len(got))
		}
		if bad := i == 1; bad != (got[0].Err != nil) || !bad && got[0].Task == nil {
			t.Errorf("task %d: update %+v", i, got[0])
		}
	}
}

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
