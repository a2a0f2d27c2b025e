package worker_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
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

// A speech stream that goes silent does not hold a stopping worker: the
// stream is closed by the stop's end at the latest (its own stall check,
// a minute by default, may come later), so the worker lets go of the
// connection and its slots.
func TestStalledStreamHonoursAStop(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	stop := b.start(t, func(c *config.Config) { c.ShutdownTimeout = 2 * time.Second })
	text := "goes silent [sim:sse-stall]"
	b.publish(t, "speech", "stall-stop", speechSpec("stall-stop", text, "stream"))
	stalled := func() int64 { return b.media.Counters().Get("streams:stalled") }
	deadline := time.Now().Add(30 * time.Second)
	for stalled() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if stalled() != 1 {
		t.Fatal("the stream never stalled")
	}
	stop()
	deadline = time.Now().Add(20 * time.Second)
	for stalled() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := stalled(); n != 0 {
		t.Errorf("%d stalled stream(s) still open after the worker stopped", n)
	}
}

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

// The bound on waiting out an exhausted quota (SLUICE_MEDIA_QUOTA_WAIT)
// counts from the job's first 433, whatever came between: a submit
// answered 429 after a 433 does not start the bound again, so the next
// 433 past the bound fails the job at once.
func TestQuotaWaitBoundSurvivesOtherErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const wait = 2 * time.Second
	b.start(t, func(c *config.Config) { c.MediaQuotaRetry, c.MediaQuotaWait = 50*time.Millisecond, wait })
	const prompt = "a harbour over quota, then busy"
	faults := b.media.Faults()
	faults.Set(apisim.EndpointVideoSubmit, apisim.Fault{Error433Rate: 1, Times: 1})
	b.publish(t, "video", "quota-busy", videoSpec("quota-busy", prompt))
	first := time.Now()
	b.awaitRecord(t, "quota-busy", 30*time.Second, func(r *state.Record) bool { return r.QuotaWaits == 1 })
	faults.Set(apisim.EndpointVideoSubmit, apisim.Fault{Error429Rate: 1, RetryAfter: 10 * time.Millisecond})
	b.awaitRecord(t, "quota-busy", 30*time.Second, func(r *state.Record) bool {
		return r.LastError != nil && r.LastError.Code != runner.CodeQuotaExhausted
	})
	for time.Since(first) <= wait+time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	faults.Set(apisim.EndpointVideoSubmit, apisim.Fault{Error433Rate: 1})
	ev := b.await(t, "quota-busy", time.Minute)
	if e := ev.Data.Error; ev.Data.Status != string(state.StatusFailed) || e == nil || e.Code != runner.CodeQuotaExhausted {
		t.Fatalf("job = %s %+v, want failed %s", ev.Data.Status, ev.Data.Error, runner.CodeQuotaExhausted)
	}
	if rec := b.record(t, "quota-busy"); rec.QuotaWaits != 1 {
		t.Errorf("quota waits %d, want 1: the 433 past the bound waited again", rec.QuotaWaits)
	}
	if n := b.media.SubmitCount(prompt); n != 0 {
		t.Errorf("tasks created = %d, want 0", n)
	}
}
