package runner

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
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
