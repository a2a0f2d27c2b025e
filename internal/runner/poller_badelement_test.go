package runner

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/testenv"
)

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

// TestUnreadableTaskShowsWhy: a task whose batch element is malformed and
// whose own query cannot be read either keeps its job waiting (the task
// may be running, and was paid), but the job's record says why it makes
// no progress instead of staying silent until the task's deadline.
func TestUnreadableTaskShowsWhy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.media.Faults().Set(apisim.EndpointTask, apisim.Fault{MalformedRate: 1})
	id := "unreadable-task"
	out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliver(t, videoSpec(id, "a paper boat [sim:bad-element]"), 1))
	if out.Action != consumer.Detach {
		t.Fatalf("Handle settled %v, want a detached wait", out.Action)
	}
	deadline := time.Now().Add(30 * time.Second)
	rec := b.record(t, id)
	for rec.LastError == nil && !rec.Status.Terminal() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		rec = b.record(t, id)
	}
	if rec.Status.Terminal() || rec.LastError == nil || rec.LastError.Code != CodeUpstreamUnavailable {
		t.Fatalf("record %+v (last error %+v): want the job waiting with last error %s", rec, rec.LastError, CodeUpstreamUnavailable)
	}
}
