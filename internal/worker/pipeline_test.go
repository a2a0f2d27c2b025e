package worker_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// servePipelines makes a worker serve the pipeline kind besides the
// kinds its steps use.
func servePipelines(c *config.Config) {
	c.Kinds = []string{"video", "speech", "compute", "pipeline"}
}

// pipelineStep is one step of a pipeline spec.
func pipelineStep(name string, needs []string, spec map[string]any) map[string]any {
	delete(spec, "id")
	st := map[string]any{"name": name, "spec": spec}
	if len(needs) > 0 {
		st["needs"] = needs
	}
	return st
}

// stepsOf returns a pipeline event's steps by name.
func stepsOf(t *testing.T, ev events.Event) map[string]state.PipelineStep {
	t.Helper()
	out := map[string]state.PipelineStep{}
	for _, s := range ev.Data.Steps {
		out[s.Name] = s
	}
	return out
}

// stepSpec returns the spec a pipeline published for step id, as kept in
// SLUICE_SPECS.
func (b *bundle) stepSpec(t *testing.T, id string) map[string]any {
	t.Helper()
	kv, err := b.nats.JS.KeyValue(context.Background(), contract.SpecsBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(testenv.Context(t, 5*time.Second), id)
	if err != nil {
		t.Fatalf("spec of %s: %v", id, err)
	}
	var spec map[string]any
	if err := json.Unmarshal(e.Value(), &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

// TestPipelineFeedsArtifactsForward runs a graph of a speech step and a
// compute step feeding a third compute step: each step runs once, after
// the steps it needs, with the artifact of its parent resolved to s3:// and
// the pipeline's tenant and labels, and the pipeline's one terminal event
// lists every step with its artifacts.
func TestPipelineFeedsArtifactsForward(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, servePipelines)

	train := computeSpec(t, b, "pl-train", "#!/bin/sh\n#SIM output model.bin 2K\n")
	train["compute"].(map[string]any)["outputs"] = []string{"/public/home/alice/pl-train/model.bin"}
	render := computeSpec(t, b, "pl-render", "#!/bin/sh\ncp model.bin copy.bin\n")
	rc := render["compute"].(map[string]any)
	rc["inputs"] = append(rc["inputs"].([]map[string]any),
		map[string]any{"from": map[string]string{"step": "train", "artifact": "model.bin"}, "to": "/public/home/alice/pl-render"},
		map[string]any{"from": map[string]string{"step": "voice", "artifact": "result-0"}, "to": "/public/home/alice/pl-render"})
	rc["outputs"] = []string{"/public/home/alice/pl-render/copy.bin"}
	spec := map[string]any{
		"id": "pl-1", "kind": "pipeline", "tenant": "acme", "labels": map[string]string{"campaign": "spring"},
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("voice", nil, speechSpec("", "pipeline voice", "async")),
			pipelineStep("train", nil, train),
			pipelineStep("render", []string{"voice", "train"}, render),
		}},
	}
	b.publish(t, "pipeline", "pl-1", spec)

	ev := b.await(t, "pl-1", 60*time.Second)
	if ev.Data.Status != "succeeded" || ev.Data.Kind != "pipeline" || ev.Data.Tenant != "acme" {
		t.Fatalf("pipeline event = %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	steps := stepsOf(t, ev)
	for _, name := range []string{"voice", "train", "render"} {
		s := steps[name]
		if s.JobID != "pl-1--"+name || s.Status != state.StatusSucceeded || len(s.Artifacts) == 0 {
			t.Errorf("step %s = %+v", name, s)
		}
		step := b.await(t, "pl-1--"+name, 5*time.Second)
		if step.Data.Tenant != "acme" || step.Data.Labels["campaign"] != "spring" || step.Data.Labels["pipeline"] != "pl-1" {
			t.Errorf("step %s event tenant %q labels %v", name, step.Data.Tenant, step.Data.Labels)
		}
	}

	// render ran on train's model: its copy has the model's bytes.
	var model, cp state.Artifact
	for _, a := range steps["train"].Artifacts {
		if strings.HasSuffix(a.Key, "/model.bin") {
			model = a
		}
	}
	for _, a := range steps["render"].Artifacts {
		if strings.HasSuffix(a.Key, "/copy.bin") {
			cp = a
		}
	}
	if model.SHA256 == "" || cp.SHA256 != model.SHA256 {
		t.Errorf("render's copy %+v is not train's model %+v", cp, model)
	}
	ins := b.stepSpec(t, "pl-1--render")["compute"].(map[string]any)["inputs"].([]any)
	if from := ins[len(ins)-2].(map[string]any)["from"]; from != model.URL {
		t.Errorf("render's input from = %v, want %s", from, model.URL)
	}
	if n := b.compute.SubmitCount("pl-train.pl-1--train"); n != 1 {
		t.Errorf("train submits = %d", n)
	}
	if n := b.media.SubmitCount("pipeline voice"); n != 1 {
		t.Errorf("voice submits = %d", n)
	}
}

// TestPipelineFailurePolicies: with stop (the default), a failed step
// fails the pipeline and skips the steps that need it; with finish, an
// independent branch still runs to its end.
func TestPipelineFailurePolicies(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, servePipelines)
	fails := func() map[string]any {
		return computeSpec(t, b, "pl-fail", "#!/bin/sh\nexit 3\n")
	}
	ok := func(text string) map[string]any { return speechSpec("", text, "async") }
	for _, policy := range []string{"stop", "finish"} {
		id := "pl-" + policy
		b.publish(t, "pipeline", id, map[string]any{
			"id": id, "kind": "pipeline",
			"pipeline": map[string]any{"on_failure": policy, "steps": []any{
				pipelineStep("bad", nil, fails()),
				pipelineStep("after", []string{"bad"}, ok(policy+" after")),
				pipelineStep("side", []string{"bad2"}, ok(policy+" side")),
				pipelineStep("bad2", nil, ok(policy+" independent")),
			}},
		})
	}
	for _, policy := range []string{"stop", "finish"} {
		ev := b.await(t, "pl-"+policy, 60*time.Second)
		steps := stepsOf(t, ev)
		if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "step_failed" {
			t.Errorf("%s: pipeline = %+v error %+v", policy, ev.Data, ev.Data.Error)
		}
		if steps["bad"].Status != state.StatusFailed || steps["after"].Status != state.StepSkipped {
			t.Errorf("%s: steps = %+v", policy, steps)
		}
		if b.media.SubmitCount(policy+" after") != 0 {
			t.Errorf("%s: a skipped step was submitted", policy)
		}
		if policy == "finish" && steps["side"].Status != state.StatusSucceeded {
			t.Errorf("finish: the independent branch = %+v", steps["side"])
		}
	}
}

// TestPipelineMissingArtifact: a reference to an artifact the parent did
// not produce fails that step input_unreachable, with its own record and
// event, before anything is paid for it.
func TestPipelineMissingArtifact(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, servePipelines)
	use := computeSpec(t, b, "pl-use", "#!/bin/sh\n")
	uc := use["compute"].(map[string]any)
	uc["inputs"] = []map[string]any{{"from": map[string]string{"step": "voice", "artifact": "result-1"}, "to": "/public/home/alice/pl-use"}}
	b.publish(t, "pipeline", "pl-miss", map[string]any{
		"id": "pl-miss", "kind": "pipeline",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("voice", nil, speechSpec("", "only one result", "async")),
			pipelineStep("use", []string{"voice"}, use),
		}},
	})
	ev := b.await(t, "pl-miss", 60*time.Second)
	if ev.Data.Status != "failed" || stepsOf(t, ev)["use"].Status != state.StatusFailed {
		t.Fatalf("pipeline = %+v", ev.Data)
	}
	step := b.await(t, "pl-miss--use", 5*time.Second)
	if step.Data.Status != "failed" || step.Data.Error == nil || step.Data.Error.Code != "input_unreachable" || step.Data.Error.Stage != "validate" {
		t.Errorf("step event = %+v error %+v", step.Data, step.Data.Error)
	}
	if n := b.compute.SubmitCount("pl-use.pl-miss--use"); n != 0 {
		t.Errorf("a step without its input was submitted %d times", n)
	}
}

// TestPipelineCancelAndRetry cancels a pipeline while its second step
// runs (cancelled upstream, the rest skipped), then retries it: only the
// steps that did not succeed run again, the first one's artifacts reused.
func TestPipelineCancelAndRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: time.Hour})
	b.start(t, servePipelines)
	b.publish(t, "pipeline", "pl-c", map[string]any{
		"id": "pl-c", "kind": "pipeline",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("one", nil, speechSpec("", "first of three", "async")),
			pipelineStep("two", []string{"one"}, speechSpec("", "second of three", "async")),
			pipelineStep("three", []string{"two"}, speechSpec("", "third of three", "async")),
		}},
	})
	b.awaitStatus(t, "pl-c--one", state.StatusSubmitted, 20*time.Second)
	b.advanceMedia(2 * time.Hour)
	b.awaitStatus(t, "pl-c--two", state.StatusSubmitted, 20*time.Second)
	if r := cancel(t, b, "pl-c"); r.Error != "" {
		t.Fatalf("cancel = %+v", r)
	}
	ev := b.await(t, "pl-c", 30*time.Second)
	steps := stepsOf(t, ev)
	if ev.Data.Status != "cancelled" || steps["one"].Status != state.StatusSucceeded ||
		steps["two"].Status != state.StatusCancelled || steps["three"].Status != state.StepSkipped {
		t.Fatalf("cancelled pipeline = %+v steps %+v", ev.Data, steps)
	}
	if two := b.await(t, "pl-c--two", 5*time.Second); two.Data.Upstream == nil || two.Data.Upstream.Status != "cancelled" {
		t.Errorf("step two was not cancelled upstream: %+v", two.Data)
	}

	out, code := b.enqueue(t, "", "retry", "pl-c")
	if code != 0 {
		t.Fatalf("retry: %d %s", code, out)
	}
	b.awaitStatus(t, "pl-c-r1--two", state.StatusSubmitted, 20*time.Second)
	b.advanceMedia(2 * time.Hour)
	b.awaitStatus(t, "pl-c-r1--three", state.StatusSubmitted, 20*time.Second)
	b.advanceMedia(2 * time.Hour)
	ev = b.await(t, "pl-c-r1", 30*time.Second)
	steps = stepsOf(t, ev)
	if ev.Data.Status != "succeeded" || steps["one"].JobID != "pl-c--one" || !steps["one"].Reused || len(steps["one"].Artifacts) != 1 {
		t.Errorf("retried pipeline = %+v steps %+v", ev.Data, steps)
	}
	if n := b.media.SubmitCount("first of three"); n != 1 {
		t.Errorf("the succeeded step ran %d times", n)
	}
	if n := b.media.SubmitCount("second of three"); n != 2 {
		t.Errorf("the cancelled step ran %d times, want 2", n)
	}
}

// TestPipelineSurvivesRestart stops the worker while a pipeline waits on
// a step: the next worker resumes the pipeline from its record, publishes
// each step once and ends the pipeline with one terminal event.
func TestPipelineSurvivesRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: time.Hour})
	stop := b.start(t, servePipelines)
	b.publish(t, "pipeline", "pl-r", map[string]any{
		"id": "pl-r", "kind": "pipeline",
		"pipeline": map[string]any{"steps": []any{
			pipelineStep("a", nil, speechSpec("", "restart a", "async")),
			pipelineStep("b", []string{"a"}, speechSpec("", "restart b", "async")),
		}},
	})
	b.awaitStatus(t, "pl-r--a", state.StatusSubmitted, 20*time.Second)
	stop()
	b.advanceMedia(2 * time.Hour)
	b.start(t, servePipelines)
	b.awaitStatus(t, "pl-r--b", state.StatusSubmitted, 30*time.Second)
	b.advanceMedia(2 * time.Hour)
	ev := b.await(t, "pl-r", 30*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("pipeline = %+v", ev.Data)
	}
	for _, text := range []string{"restart a", "restart b"} {
		if n := b.media.SubmitCount(text); n != 1 {
			t.Errorf("%s: submits = %d", text, n)
		}
	}
}

// TestEnqueuePipeline drives the CLI: enqueue pipeline --wait follows the
// pipeline to its end and lists its steps, status shows them, submit
// takes a pipeline spec too, and an invalid graph is refused before
// anything is published, naming the step and the field.
func TestEnqueuePipeline(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, servePipelines)
	spec := func(id string) string {
		data, _ := json.Marshal(map[string]any{
			"version": 1, "id": id, "kind": "pipeline",
			"pipeline": map[string]any{"steps": []any{
				pipelineStep("first", nil, speechSpec("", id+" first", "async")),
				pipelineStep("second", []string{"first"}, speechSpec("", id+" second", "async")),
			}},
		})
		return string(data)
	}
	file := t.TempDir() + "/p.json"
	if err := os.WriteFile(file, []byte(spec("cli-pl")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := b.enqueue(t, "", "pipeline", "-f", file, "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "cli-pl--first") || !strings.Contains(out, "cli-pl--second") {
		t.Fatalf("pipeline --wait: exit %d\n%s", code, out)
	}
	out, code = b.enqueue(t, "", "status", "cli-pl")
	if code != 0 || !regexp.MustCompile(`second\s+succeeded\s+cli-pl--second`).MatchString(out) {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	out, code = b.enqueue(t, "", "status", "cli-pl", "--json")
	var job struct {
		Steps []state.PipelineStep `json:"steps"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &job) != nil || len(job.Steps) != 2 || job.Steps[1].Status != state.StatusSucceeded {
		t.Fatalf("status --json: exit %d\n%s", code, out)
	}

	out, code = b.enqueue(t, spec("cli-pl-2"), "submit", "-f", "-", "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "cli-pl-2") {
		t.Fatalf("submit of a pipeline: exit %d\n%s", code, out)
	}

	bad := strings.Replace(spec("cli-pl-bad"), `"needs":["first"]`, `"needs":["ghost"]`, 1)
	out, code = b.enqueue(t, bad, "pipeline", "-f", "-")
	if code != 2 || !strings.Contains(out, `pipeline.steps[1].needs[0]: unknown step "ghost"`) {
		t.Fatalf("invalid pipeline: exit %d\n%s", code, out)
	}
	speech, _ := json.Marshal(speechSpec("cli-not-pl", "not a pipeline", "async"))
	if out, code = b.enqueue(t, string(speech), "pipeline", "-f", "-"); code != 2 || !strings.Contains(out, "kind") {
		t.Fatalf("a speech spec given to enqueue pipeline: exit %d\n%s", code, out)
	}
}

// TestPipelineBudget: a pipeline reserves its steps' whole estimate before
// its first step: a tenant whose budget covers exactly the pipeline runs
// every step (each drawing on that reservation rather than asking the
// budget again), and one whose budget covers its first step but not the
// whole fails budget_exhausted with no step published or paid for.
func TestPipelineBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, args := range [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "exact", "--budget", "10", "--per", "month", "--on-budget", "fail"},
		{"tenants", "set", "short", "--budget", "7", "--per", "month", "--on-budget", "fail"},
	} {
		if out, code := b.enqueue(t, "", args...); code != 0 {
			t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
		}
	}
	b.start(t, servePipelines)
	for _, tenant := range []string{"exact", "short"} {
		id := "pl-budget-" + tenant
		b.publish(t, "pipeline", id, map[string]any{
			"id": id, "kind": "pipeline", "tenant": tenant,
			"pipeline": map[string]any{"steps": []any{
				pipelineStep("one", nil, videoSpec("", "budget one "+tenant)),
				pipelineStep("two", []string{"one"}, videoSpec("", "budget two "+tenant)),
			}},
		})
	}
	ev := b.await(t, "pl-budget-exact", time.Minute)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("exact: %+v error %+v", ev.Data, ev.Data.Error)
	}
	for _, step := range []string{"one", "two"} {
		if s := b.await(t, "pl-budget-exact--"+step, 5*time.Second); s.Data.Cost == nil || *s.Data.Cost != 5 {
			t.Errorf("exact step %s cost %v, want 5", step, s.Data.Cost)
		}
	}
	ev = b.await(t, "pl-budget-short", time.Minute)
	if e := ev.Data.Error; ev.Data.Status != "failed" || e == nil || e.Code != "budget_exhausted" {
		t.Fatalf("short: %+v error %+v", ev.Data, ev.Data.Error)
	}
	for _, s := range ev.Data.Steps {
		if s.Status != state.StepSkipped && s.Status != state.StepWaiting {
			t.Errorf("short: step %+v ran", s)
		}
	}
	if n := b.media.SubmitCount("budget one short"); n != 0 {
		t.Errorf("short: the first step was submitted %d times", n)
	}
	out, code := b.enqueue(t, "", "tenants", "show", "exact", "--json")
	if code != 0 || !strings.Contains(out, `"spent":10`) {
		t.Errorf("exact's spend: exit %d %s", code, out)
	}
}

// TestPipelineResumesWhatItAnnounced: a worker killed after it recorded a
// step queued, and another failed for its missing input, but before it
// sent either leaves a record that the next delivery acts on: the queued
// step is published and runs once, the failed one gets its own record
// and one failed event.
func TestPipelineResumesWhatItAnnounced(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	use := computeSpec(t, b, "pl-k-use", "#!/bin/sh\n")
	use["compute"].(map[string]any)["inputs"] = []map[string]any{{"from": map[string]string{"step": "v", "artifact": "result-1"}, "to": "/public/home/alice/pl-k"}}
	spec := map[string]any{
		"id": "pl-k", "kind": "pipeline",
		"pipeline": map[string]any{"on_failure": "finish", "steps": []any{
			pipelineStep("v", nil, speechSpec("", "resumed v", "async")),
			pipelineStep("u", []string{"v"}, use),
			pipelineStep("w", []string{"v"}, speechSpec("", "resumed w", "async")),
		}},
	}
	missing := &state.Error{Code: "input_unreachable", Message: `step "v" produced no artifact "result-1"`, Stage: state.StageValidate}
	b.leaveRecord(t, "pl-k", func(r *state.Record) {
		r.Kind, r.Status = "pipeline", state.StatusRunning
		r.Pipeline = &state.Pipeline{Steps: []state.PipelineStep{
			{Name: "v", JobID: "pl-k--v", Status: state.StatusSucceeded, Artifacts: []state.Artifact{{
				URL: "s3://" + b.s3.Bucket + "/sluice/speech/pl-k--v/result-0.mp3", Bucket: b.s3.Bucket, Key: "sluice/speech/pl-k--v/result-0.mp3",
				SHA256: strings.Repeat("0", 64), ContentType: "audio/mpeg"}}},
			{Name: "u", JobID: "pl-k--u", Status: state.StatusFailed, Error: missing},
			{Name: "w", JobID: "pl-k--w", Status: state.StepQueued},
		}}
	})
	b.start(t, servePipelines)
	b.publish(t, "pipeline", "pl-k", spec)
	ev := b.await(t, "pl-k", 60*time.Second)
	if steps := stepsOf(t, ev); ev.Data.Status != "failed" || steps["w"].Status != state.StatusSucceeded || steps["u"].Status != state.StatusFailed {
		t.Fatalf("pipeline = %+v", ev.Data)
	}
	if u := b.await(t, "pl-k--u", 5*time.Second); u.Data.Error == nil || u.Data.Error.Code != "input_unreachable" {
		t.Errorf("u's event = %+v", u.Data)
	}
	if n := b.media.SubmitCount("resumed w"); n != 1 {
		t.Errorf("w submitted %d times", n)
	}
	if n := b.media.SubmitCount("resumed v"); n != 0 {
		t.Errorf("v, recorded succeeded, submitted %d times", n)
	}
}

// TestPipelineIDTooLongForItsSteps: a pipeline whose id comes from its
// message (the spec has none) and leaves a step no room for a job id fails
// invalid_spec naming the step, before any step is published.
func TestPipelineIDTooLongForItsSteps(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, servePipelines)
	id := "pl-" + strings.Repeat("x", 122)
	b.publish(t, "pipeline", id, map[string]any{
		"kind":     "pipeline",
		"pipeline": map[string]any{"steps": []any{pipelineStep("voice", nil, speechSpec("", "never said", "async"))}},
	})
	ev := b.await(t, id, 30*time.Second)
	if e := ev.Data.Error; ev.Data.Status != "failed" || e == nil || e.Code != "invalid_spec" || !strings.Contains(e.Message, "pipeline.steps[0].name") {
		t.Fatalf("pipeline = %+v error %+v", ev.Data, ev.Data.Error)
	}
	if n := b.media.SubmitCount("never said"); n != 0 {
		t.Errorf("the step was submitted %d times", n)
	}
}
