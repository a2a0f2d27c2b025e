package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// A media job delivered again after its SLUICE_TASK_TIMEOUT has passed (a
// long store outage, workers down) asks upstream once before it gives up:
// a task that succeeded meanwhile is collected, with no second submit and
// no cancel; one still running fails timeout and is cancelled upstream.
func TestRedeliveryPastTheTaskDeadline(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	media, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: b.simURL, APIKey: secretMediaKey})
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 2 * time.Second
	// submitted is when the last worker submitted both tasks, as its
	// record says: two deadlines ago.
	submitted := time.Now().UTC().Add(-2 * timeout)
	cases := []struct {
		id, prompt string
		want       apiclient.TaskStatus // upstream, when the job is delivered again
		status     state.Status
		code       string
	}{
		{"past-deadline-done", "a task that ended during an outage [sim:duration=100ms]", apiclient.TaskSucceeded, state.StatusSucceeded, ""},
		{"past-deadline-running", "a task that runs on [sim:duration=1h]", apiclient.TaskRunning, state.StatusFailed, runner.CodeTimeout},
	}
	for _, c := range cases {
		ctx := testenv.Context(t, 10*time.Second)
		task, err := media.SubmitVideo(ctx, apiclient.VideoRequest{Model: "video-model", Input: apiclient.VideoInput{Prompt: c.prompt},
			Parameters: apiclient.VideoParameters{Resolution: "768P", Duration: 5, Ratio: "16:9"}})
		if err != nil {
			t.Fatalf("%s: submit: %v", c.id, err)
		}
		waitFor(t, 30*time.Second, c.id+"'s task "+string(c.want), func() bool {
			got, err := media.GetTask(ctx, task.Output.TaskID)
			return err == nil && got.Output.TaskStatus == c.want
		})
		b.leaveRecord(t, c.id, func(r *state.Record) {
			r.Kind, r.Status, r.Submits, r.SubmittedAt = "video", state.StatusSubmitted, 1, &submitted
			r.Upstream = state.Upstream{TaskID: task.Output.TaskID, RequestID: task.RequestID, Status: string(task.Output.TaskStatus)}
		})
	}
	b.start(t, func(c *config.Config) { c.TaskTimeout = timeout })
	for _, c := range cases {
		b.publish(t, "video", c.id, videoSpec(c.id, c.prompt))
	}

	for _, c := range cases {
		ev := b.await(t, c.id, time.Minute)
		code := ""
		if ev.Data.Error != nil {
			code = ev.Data.Error.Code
		}
		if ev.Data.Status != string(c.status) || code != c.code {
			t.Errorf("%s: %s %+v, want %s %q", c.id, ev.Data.Status, ev.Data.Error, c.status, c.code)
		}
		if n := b.media.SubmitCount(c.prompt); n != 1 {
			t.Errorf("%s: submits = %d, want 1", c.id, n)
		}
	}
	if n := b.media.Counters().Requests(apisim.EndpointCancel); n != 1 {
		t.Errorf("cancels = %d, want 1 (the task still running)", n)
	}
}
