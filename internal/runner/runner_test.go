package runner

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestSupersededDeliveryCannotWrite holds two deliveries of one job: once
// the second has begun, every fenced write of the first is refused and
// the record stays the second's.
func TestSupersededDeliveryCannotWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	spec := videoSpec("fenced", "a paper boat")
	first, _, done := b.r.begin(ctx, b.deliver(t, spec, 2))
	if done {
		t.Fatal("the first delivery did not go on")
	}
	defer first.unregister()
	second, _, done := b.r.begin(ctx, b.deliver(t, spec, 3))
	if done {
		t.Fatal("the second delivery did not go on")
	}
	defer second.unregister()
	if first.attempt != 1 || second.attempt != 2 {
		t.Fatalf("attempts %d and %d, want 1 and 2", first.attempt, second.attempt)
	}

	if err := b.r.claimSubmit(ctx, first, func(*state.Record) {}); !errors.Is(err, errSuperseded) {
		t.Fatalf("the first delivery's claim: %v, want errSuperseded", err)
	}
	if out := b.r.terminal(ctx, first, state.StatusFailed, fail(CodeUpstreamFailed, state.StagePoll, false, "x")); out.Action != consumer.Retry {
		t.Fatalf("the first delivery's failure settled %v, want a retry", out.Action)
	}
	if err := b.r.claimSubmit(ctx, second, func(*state.Record) {}); err != nil {
		t.Fatalf("the second delivery's claim: %v", err)
	}
	taskID := func(rec *state.Record) string { return rec.Upstream.TaskID }
	record := func(j *job, id string) error {
		return b.r.writeRetried(ctx, j, submitWindow(id, taskID), state.StatusSubmitted, set(func(rec *state.Record) { rec.Upstream.TaskID = id }))
	}
	if err := record(second, "task-2"); err != nil {
		t.Fatalf("the second delivery records its task: %v", err)
	}
	if err := record(first, "task-1"); !errors.Is(err, errSuperseded) {
		t.Fatalf("the first delivery records its task: %v, want errSuperseded", err)
	}
	if err := record(second, "task-2"); err != nil {
		t.Fatalf("recording the same task again: %v", err)
	}
	if err := b.r.writeRetried(ctx, first, lastClaim(first.rec.Submits-1), state.StatusCollecting, set(func(*state.Record) {})); !errors.Is(err, errSuperseded) {
		t.Fatalf("a stream of an earlier claim: %v, want errSuperseded", err)
	}
	if out := b.r.terminal(ctx, second, state.StatusSucceeded, nil); out.Action != consumer.Ack {
		t.Fatalf("the second delivery's success settled %v, want an ack", out.Action)
	}
	if err := b.r.write(ctx, first, live, state.StatusRunning, set(func(*state.Record) {})); !errors.Is(err, errAlreadyFinished) {
		t.Fatalf("a step after the end: %v, want errAlreadyFinished", err)
	}
	rec := b.record(t, "fenced")
	if rec.Status != state.StatusSucceeded || rec.Upstream.TaskID != "task-2" || rec.Attempts != 2 || rec.Submits != 1 {
		t.Fatalf("record %+v, want the second delivery's success with task-2", rec)
	}
}

// TestResumeAfterCheckpoint delivers a video job again after a worker
// stopped at each of its checkpoints: it submits only when no task is
// recorded, and ends succeeded with its artifact stored.
func TestResumeAfterCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		status  state.Status
		upload  bool // the earlier delivery's task exists upstream
		submits int64
	}{
		{state.StatusReceived, false, 1},
		{state.StatusSubmitting, false, 1},
		{state.StatusSubmitted, true, 1},
		{state.StatusRunning, true, 1},
		{state.StatusCollecting, true, 1},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			t.Parallel()
			id := "resume-" + string(tc.status)
			prompt := "a paper boat " + id + " [sim:duration=200ms]"
			b.write(t, id, func(rec *state.Record) {
				rec.Kind, rec.Status, rec.Attempts = "video", tc.status, 1
				if tc.status == state.StatusSubmitting {
					rec.Submits = 1
				}
				if tc.upload {
					task := b.submitTask(t, prompt)
					now := time.Now().UTC()
					rec.Submits, rec.Upstream.TaskID, rec.SubmittedAt = 1, task.Output.TaskID, &now
				}
			})
			out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliver(t, videoSpec(id, prompt), 2))
			if out.Action != consumer.Detach {
				t.Fatalf("Handle settled %v, want a detached wait", out.Action)
			}
			rec := b.waitEnd(t, id)
			if rec.Status != state.StatusSucceeded || len(rec.Artifacts) != 1 || rec.Attempts != 2 {
				t.Fatalf("record %+v, want succeeded with one artifact at attempt 2", rec)
			}
			if got := b.media.SubmitCount(prompt); got != tc.submits {
				t.Fatalf("%d submits upstream, want %d", got, tc.submits)
			}
		})
	}
}

// TestCancelAtEachStep cancels a video job at each of its steps: before
// its submit it ends cancelled with nothing submitted; left inside its
// submit window by a dead worker it ends cancelled with the note that a
// submit may have happened (a media task cannot be looked up by name),
// or, when a task id reached the record, that task is cancelled upstream;
// while its task runs the task is cancelled upstream; a task that ended
// first keeps its outcome.
func TestCancelAtEachStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("before the submit", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			status state.Status
			note   string
		}{{state.StatusReceived, ""}, {state.StatusSubmitting, NoteSubmitMayHaveHappened}} {
			id := "cancel-" + string(tc.status)
			prompt := "a paper boat " + id
			b.write(t, id, func(rec *state.Record) { rec.Kind, rec.Status, rec.Attempts = "video", tc.status, 1 })
			b.cancel(t, id)
			out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliver(t, videoSpec(id, prompt), 2))
			if out.Action != consumer.Ack {
				t.Fatalf("%s: Handle settled %v, want an ack", tc.status, out.Action)
			}
			rec := b.record(t, id)
			if rec.Status != state.StatusCancelled || b.media.SubmitCount(prompt) != 0 || rec.Note != tc.note {
				t.Fatalf("%s: record %+v with %d submits, want cancelled unsubmitted with note %q", tc.status, rec, b.media.SubmitCount(prompt), tc.note)
			}
			var ev struct {
				Data struct {
					Note string `json:"note"`
				} `json:"data"`
			}
			if err := json.Unmarshal(rec.TerminalEvent, &ev); err != nil || ev.Data.Note != tc.note {
				t.Fatalf("%s: event note %q (%v), want %q", tc.status, ev.Data.Note, err, tc.note)
			}
		}
	})
	t.Run("inside the submit window with a task id", func(t *testing.T) { cancelKnownTaskInSubmitWindow(t, b) })
	t.Run("while the task runs", func(t *testing.T) {
		t.Parallel()
		for _, status := range []state.Status{state.StatusSubmitted, state.StatusRunning} {
			id := "cancel-" + string(status)
			prompt := "a paper boat " + id + " [sim:duration=1h]"
			out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliver(t, videoSpec(id, prompt), 1))
			if out.Action != consumer.Detach {
				t.Fatalf("%s: Handle settled %v, want a detached wait", status, out.Action)
			}
			b.waitStatus(t, id, status)
			b.cancel(t, id)
			if rec := b.waitEnd(t, id); rec.Status != state.StatusCancelled || rec.Upstream.Status != "cancelled" {
				t.Fatalf("%s: record %+v, want cancelled upstream and here", status, rec)
			}
		}
	})
	t.Run("after the task ended", func(t *testing.T) {
		t.Parallel()
		id := "cancel-collecting"
		prompt := "a paper boat " + id + " [sim:duration=0s]"
		task := b.submitTask(t, prompt)
		b.write(t, id, func(rec *state.Record) {
			now := time.Now().UTC()
			rec.Kind, rec.Status, rec.Attempts, rec.Submits = "video", state.StatusCollecting, 1, 1
			rec.Upstream.TaskID, rec.SubmittedAt = task.Output.TaskID, &now
		})
		b.cancel(t, id)
		out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliver(t, videoSpec(id, prompt), 2))
		if out.Action != consumer.Detach {
			t.Fatalf("Handle settled %v, want a detached wait", out.Action)
		}
		if rec := b.waitEnd(t, id); rec.Status != state.StatusSucceeded || len(rec.Artifacts) != 1 {
			t.Fatalf("record %+v, want the task's success", rec)
		}
	})
}

// cancelKnownTaskInSubmitWindow: a video job whose task id reached its
// record while the record stayed at "submitting", then cancelled, has
// that task cancelled upstream, and is not submitted again.
func cancelKnownTaskInSubmitWindow(t *testing.T, b *bundle) {
	t.Parallel()
	id := "cancel-submitting-known"
	prompt := "a paper boat " + id + " [sim:duration=1h]"
	task := b.submitTask(t, prompt)
	b.write(t, id, func(rec *state.Record) {
		rec.Kind, rec.Status, rec.Attempts, rec.Submits = "video", state.StatusSubmitting, 1, 1
		rec.Upstream.TaskID = task.Output.TaskID
	})
	b.cancel(t, id)
	b.r.Handle(testenv.Context(t, 30*time.Second), b.deliver(t, videoSpec(id, prompt), 2))
	rec := b.waitEnd(t, id)
	if rec.Status != state.StatusCancelled || rec.Upstream.Status != "cancelled" || rec.Note != "" || b.media.SubmitCount(prompt) != 1 {
		t.Fatalf("record %+v, want its task cancelled upstream and here, not submitted again", rec)
	}
}
