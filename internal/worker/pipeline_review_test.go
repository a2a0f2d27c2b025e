package worker_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestPipelineStepIDTooLongFailsFirst: a pipeline whose spec has no id
// takes its Nats-Msg-Id as its id; when that id and a step's name make a
// step id longer than a job id may be, the pipeline fails invalid_spec
// before any step runs, instead of paying for its first steps and then
// waiting for ever on a step whose job can never bear its id.
func TestPipelineStepIDTooLongFailsFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, servePipelines)
	id := strings.Repeat("p", 120)
	b.publish(t, "pipeline", id, map[string]any{
		"kind": "pipeline",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("a", nil, speechSpec("", "long id first", "async")),
			pipelineStep("second-step", []string{"a"}, speechSpec("", "long id second", "async")),
		}},
	})
	ev := b.await(t, id, 60*time.Second)
	if e := ev.Data.Error; ev.Data.Status != "failed" || e == nil || e.Code != "invalid_spec" || !strings.Contains(e.Message, "steps[1].name") {
		t.Fatalf("pipeline = %+v error %+v", ev.Data, ev.Data.Error)
	}
	if n := b.media.SubmitCount("long id first"); n != 0 {
		t.Errorf("the first step was submitted %d times", n)
	}
}

// TestPipelineStepLabelsLeaveRoom: every step carries its pipeline's
// label, which is what lets it draw on the pipeline's reservation: a step
// (or a pipeline whose steps inherit its labels) with as many labels as a
// spec may have leaves no room for it and is invalid_spec before any step
// runs; a step whose own labels include a "pipeline" label runs on a
// budget that covers the pipeline exactly: that label becomes its
// pipeline's id, not another pipeline's whose reservation it would drain.
func TestPipelineStepLabelsLeaveRoom(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, args := range [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "full", "--budget", "10", "--per", "month", "--on-budget", "fail"},
	} {
		if out, code := b.enqueue(t, "", args...); code != 0 {
			t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
		}
	}
	b.start(t, servePipelines)
	// n labels, one of them "pipeline" when another is given.
	labels := func(n int, another string) map[string]string {
		out := map[string]string{}
		if another != "" {
			out["pipeline"] = another
		}
		for i := len(out); i < n; i++ {
			out[fmt.Sprintf("k%d", i)] = "v"
		}
		return out
	}
	pipeline := func(id string, n int, another string) map[string]any {
		one := videoSpec("", id+" one")
		one["labels"] = labels(n, another)
		return map[string]any{
			"id": id, "kind": "pipeline", "tenant": "full",
			"pipeline": map[string]any{"steps": []any{
				pipelineStep("one", nil, one),
				pipelineStep("two", []string{"one"}, videoSpec("", id+" two")),
			}},
		}
	}
	b.publish(t, "pipeline", "pl-full", pipeline("pl-full", 32, ""))
	ev := b.await(t, "pl-full", time.Minute)
	if e := ev.Data.Error; ev.Data.Status != "failed" || e == nil || e.Code != "invalid_spec" || !strings.Contains(e.Message, "pipeline.steps[0].spec.labels") {
		t.Fatalf("32 labels: pipeline = %+v error %+v", ev.Data, ev.Data.Error)
	}
	if n := b.media.SubmitCount("pl-full one"); n != 0 {
		t.Errorf("32 labels: the first step was submitted %d times", n)
	}

	b.publish(t, "pipeline", "pl-room", pipeline("pl-room", 32, "someone-else"))
	ev = b.await(t, "pl-room", time.Minute)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("own pipeline label: pipeline = %+v error %+v steps %+v", ev.Data, ev.Data.Error, ev.Data.Steps)
	}
	if one := b.await(t, "pl-room--one", 5*time.Second); one.Data.Labels["pipeline"] != "pl-room" {
		t.Errorf("step one's pipeline label = %q", one.Data.Labels["pipeline"])
	}
}

// TestPipelineWithoutSpecIDDrawsOnItsBudget: a pipeline whose spec has no
// id (its id is its Nats-Msg-Id) labels its steps with that id, so they
// draw on its reservation: a budget that covers it exactly runs it.
func TestPipelineWithoutSpecIDDrawsOnItsBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, args := range [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "noid", "--budget", "10", "--per", "month", "--on-budget", "fail"},
	} {
		if out, code := b.enqueue(t, "", args...); code != 0 {
			t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
		}
	}
	b.start(t, servePipelines)
	b.publish(t, "pipeline", "pl-noid", map[string]any{
		"kind": "pipeline", "tenant": "noid",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("one", nil, videoSpec("", "no id one")),
			pipelineStep("two", []string{"one"}, videoSpec("", "no id two")),
		}},
	})
	ev := b.await(t, "pl-noid", time.Minute)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("pipeline = %+v error %+v steps %+v", ev.Data, ev.Data.Error, ev.Data.Steps)
	}
	if one := b.await(t, "pl-noid--one", 5*time.Second); one.Data.Labels["pipeline"] != "pl-noid" {
		t.Errorf("step one's pipeline label = %q", one.Data.Labels["pipeline"])
	}
}

// TestPipelineReservationNotDrawnByOthers: an ordinary job of the same
// tenant labelled pipeline=P does not draw on P's reservation: it is
// checked against the budget like any job, and P, its budget reserved,
// still runs every step.
func TestPipelineReservationNotDrawnByOthers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: time.Hour})
	for _, args := range [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "held", "--budget", "10", "--per", "month", "--on-budget", "fail"},
	} {
		if out, code := b.enqueue(t, "", args...); code != 0 {
			t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
		}
	}
	b.start(t, servePipelines)
	b.publish(t, "pipeline", "pl-held", map[string]any{
		"id": "pl-held", "kind": "pipeline", "tenant": "held",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("one", nil, videoSpec("", "held one")),
			pipelineStep("two", []string{"one"}, videoSpec("", "held two")),
		}},
	})
	b.awaitStatus(t, "pl-held--one", state.StatusSubmitted, 20*time.Second)
	other := videoSpec("not-a-step", "not a step")
	other["tenant"], other["labels"] = "held", map[string]string{"pipeline": "pl-held"}
	b.publish(t, "video", "not-a-step", other)
	if ev := b.await(t, "not-a-step", 30*time.Second); ev.Data.Error == nil || ev.Data.Error.Code != "budget_exhausted" {
		t.Errorf("the other job = %+v error %+v", ev.Data, ev.Data.Error)
	}
	b.advanceMedia(2 * time.Hour)
	b.awaitStatus(t, "pl-held--two", state.StatusSubmitted, 20*time.Second)
	b.advanceMedia(2 * time.Hour)
	if ev := b.await(t, "pl-held", 30*time.Second); ev.Data.Status != "succeeded" {
		t.Errorf("pipeline = %+v error %+v", ev.Data, ev.Data.Error)
	}
}

// TestPipelineSecondRetryReusesFirstRetrysSteps: retrying P again after
// its first retry P-r1 stopped reruns only what succeeded in neither: a
// step P-r1 ran to success is reused, not paid a second time.
func TestPipelineSecondRetryReusesFirstRetrysSteps(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: time.Hour})
	b.start(t, servePipelines)
	b.publish(t, "pipeline", "pl-rr", map[string]any{
		"id": "pl-rr", "kind": "pipeline",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("one", nil, speechSpec("", "rr first", "async")),
			pipelineStep("two", []string{"one"}, speechSpec("", "rr second", "async")),
			pipelineStep("three", []string{"two"}, speechSpec("", "rr third", "async")),
		}},
	})
	b.awaitStatus(t, "pl-rr--one", state.StatusSubmitted, 20*time.Second)
	b.advanceMedia(2 * time.Hour)
	b.awaitStatus(t, "pl-rr--two", state.StatusSubmitted, 20*time.Second)
	if r := cancel(t, b, "pl-rr"); r.Error != "" {
		t.Fatalf("cancel = %+v", r)
	}
	b.await(t, "pl-rr", 30*time.Second)

	if out, code := b.enqueue(t, "", "retry", "pl-rr"); code != 0 {
		t.Fatalf("retry: %d %s", code, out)
	}
	b.awaitStatus(t, "pl-rr-r1--two", state.StatusSubmitted, 20*time.Second)
	b.advanceMedia(2 * time.Hour)
	b.awaitStatus(t, "pl-rr-r1--three", state.StatusSubmitted, 20*time.Second)
	if r := cancel(t, b, "pl-rr-r1"); r.Error != "" {
		t.Fatalf("cancel r1 = %+v", r)
	}
	if ev := b.await(t, "pl-rr-r1", 30*time.Second); stepsOf(t, ev)["two"].Status != state.StatusSucceeded {
		t.Fatalf("r1 = %+v", ev.Data)
	}

	if out, code := b.enqueue(t, "", "retry", "pl-rr"); code != 0 || !strings.Contains(out, "pl-rr-r2") {
		t.Fatalf("second retry: %d %s", code, out)
	}
	b.awaitStatus(t, "pl-rr-r2--three", state.StatusSubmitted, 20*time.Second)
	b.advanceMedia(2 * time.Hour)
	ev := b.await(t, "pl-rr-r2", 30*time.Second)
	steps := stepsOf(t, ev)
	if ev.Data.Status != "succeeded" || steps["two"].JobID != "pl-rr-r1--two" || !steps["two"].Reused {
		t.Errorf("second retry = %+v steps %+v", ev.Data, steps)
	}
	if n := b.media.SubmitCount("rr second"); n != 2 {
		t.Errorf("step two, succeeded in the first retry, was submitted %d times, want 2", n)
	}
}

// TestPipelineCancelReleasesItsBudget: a pipeline cancelled while its
// first step runs leaves nothing reserved once it ended: the running
// step's draw settles with it, the rest of the pipeline's reservation is
// released with the pipeline.
func TestPipelineCancelReleasesItsBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: time.Hour})
	for _, args := range [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "rel", "--budget", "100", "--per", "month", "--on-budget", "fail"},
	} {
		if out, code := b.enqueue(t, "", args...); code != 0 {
			t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
		}
	}
	b.start(t, servePipelines)
	b.publish(t, "pipeline", "pl-rel", map[string]any{
		"id": "pl-rel", "kind": "pipeline", "tenant": "rel",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("one", nil, videoSpec("", "rel one")),
			pipelineStep("two", []string{"one"}, videoSpec("", "rel two")),
			pipelineStep("three", nil, videoSpec("", "rel three")),
		}},
	})
	b.awaitStatus(t, "pl-rel--one", state.StatusSubmitted, 20*time.Second)
	b.awaitStatus(t, "pl-rel--three", state.StatusSubmitted, 20*time.Second)
	if r := cancel(t, b, "pl-rel"); r.Error != "" {
		t.Fatalf("cancel = %+v", r)
	}
	if ev := b.await(t, "pl-rel", 30*time.Second); ev.Data.Status != "cancelled" {
		t.Fatalf("pipeline = %+v", ev.Data)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, code := b.enqueue(t, "", "tenants", "show", "rel", "--json")
		if code == 0 && regexp.MustCompile(`"reserved":0[,}]`).MatchString(out) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the pipeline's end: exit %d %s", code, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestPipelineReservesOnlyItsTenantsSteps: a step that names another
// tenant is paid by that tenant, so the pipeline reserves only its own
// tenant's steps: a budget that covers those runs the pipeline.
func TestPipelineReservesOnlyItsTenantsSteps(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, args := range [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "mine", "--budget", "5", "--per", "month", "--on-budget", "fail"},
	} {
		if out, code := b.enqueue(t, "", args...); code != 0 {
			t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
		}
	}
	b.start(t, servePipelines)
	theirs := videoSpec("", "theirs two")
	theirs["tenant"] = "theirs"
	b.publish(t, "pipeline", "pl-mine", map[string]any{
		"id": "pl-mine", "kind": "pipeline", "tenant": "mine",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("one", nil, videoSpec("", "mine one")),
			pipelineStep("two", []string{"one"}, theirs),
		}},
	})
	ev := b.await(t, "pl-mine", time.Minute)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("pipeline = %+v error %+v", ev.Data, ev.Data.Error)
	}
	if two := b.await(t, "pl-mine--two", 5*time.Second); two.Data.Tenant != "theirs" {
		t.Errorf("step two's tenant = %q", two.Data.Tenant)
	}
}

// TestPipelineResumesAStepCancelledBeforeItsPublish: a worker recorded a
// step queued and died before sending it; meanwhile the step was
// cancelled by its own id (enqueue cancel P--b), which leaves a record
// with the cancel and no status. The next delivery still sends the step,
// which ends cancelled when received, and the pipeline ends instead of
// waiting for ever on a step never sent.
func TestPipelineResumesAStepCancelledBeforeItsPublish(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.leaveRecord(t, "pl-uc", func(r *state.Record) {
		r.Kind, r.Status = "pipeline", state.StatusRunning
		r.Pipeline = &state.Pipeline{Steps: []state.PipelineStep{
			{Name: "a", JobID: "pl-uc--a", Status: state.StatusSucceeded},
			{Name: "b", JobID: "pl-uc--b", Status: state.StepQueued},
		}}
	})
	if _, err := state.NewStore(b.kv(t), "cli", nil).RequestCancel(testenv.Context(t, 5*time.Second), "pl-uc--b"); err != nil {
		t.Fatal(err)
	}
	b.start(t, servePipelines)
	b.publish(t, "pipeline", "pl-uc", map[string]any{
		"id": "pl-uc", "kind": "pipeline",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("a", nil, speechSpec("", "uc a", "async")),
			pipelineStep("b", []string{"a"}, speechSpec("", "uc b", "async")),
		}},
	})
	ev := b.await(t, "pl-uc", 30*time.Second)
	if steps := stepsOf(t, ev); ev.Data.Status != "failed" || steps["b"].Status != state.StatusCancelled {
		t.Fatalf("pipeline = %+v", ev.Data)
	}
	if n := b.media.SubmitCount("uc b"); n != 0 {
		t.Errorf("the cancelled step was submitted %d times", n)
	}
}
