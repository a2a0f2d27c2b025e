package worker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// A retry that takes over the task of a job that failed
// artifact_store_refused did not pay for it: its event reports no cost
// of that task again (the original's event did), so that enqueue spend,
// which sums the events, counts the task once, as the ledger does.
func TestRetryOverStoreRefusedTaskReportsNoSecondCost(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	if out, code := b.enqueue(t, "", "prices", "set", "video.768P.second=1"); code != 0 {
		t.Fatalf("enqueue prices set: exit %d: %s", code, out)
	}
	prompt := "a refused harbour [sim:duration=0s]"
	media, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: b.simURL, APIKey: secretMediaKey})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t, 20*time.Second)
	task, err := media.SubmitVideo(ctx, apiclient.VideoRequest{Model: "video-model", Input: apiclient.VideoInput{Prompt: prompt},
		Parameters: apiclient.VideoParameters{Resolution: "768P", Duration: 5, Ratio: "16:9"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := media.GetTask(ctx, task.Output.TaskID)
	if err != nil || done.Output.TaskStatus != apiclient.TaskSucceeded {
		t.Fatalf("task: %+v, %v", done, err)
	}
	b.leaveRecord(t, "refused-cost", func(r *state.Record) {
		now := time.Now().UTC()
		r.Kind, r.Status, r.Submits, r.SubmittedAt, r.FinishedAt = "video", state.StatusFailed, 1, &now, &now
		r.Upstream = state.Upstream{TaskID: task.Output.TaskID, Status: string(apiclient.TaskSucceeded)}
		r.Usage = done.Usage
		r.Error = &state.Error{Code: runner.CodeStoreRefused, Message: "the store refused", Stage: state.StageCollect}
	})
	specs, err := b.nats.JS.KeyValue(ctx, contract.SpecsBucket)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(videoSpec("refused-cost", prompt))
	if err := state.NewSpecs(specs).Keep(ctx, "refused-cost", spec); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	if out, code := b.enqueue(t, "", "retry", "refused-cost"); code != 0 || !strings.Contains(out, task.Output.TaskID) {
		t.Fatalf("enqueue retry = %d:\n%s\nwant a retry reusing task %s", code, out, task.Output.TaskID)
	}
	ev := b.await(t, "refused-cost-r1", time.Minute)
	if ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("retry = %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	if ev.Data.Cost != nil && *ev.Data.Cost != 0 {
		t.Errorf("the retry's event reports a cost of %v for a task it took over", *ev.Data.Cost)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
}
