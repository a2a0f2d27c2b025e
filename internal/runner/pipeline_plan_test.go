package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestPlanPipeline walks planPipeline's decisions on a diamond (a; b and
// c need a; d needs b and c) plus an independent e.
func TestPlanPipeline(t *testing.T) {
	t.Parallel()
	speech := func() *jobspec.Spec { return &jobspec.Spec{Kind: jobspec.KindSpeech} }
	p := &jobspec.Pipeline{Steps: []jobspec.Step{
		{Name: "a", Spec: speech()}, {Name: "b", Needs: []string{"a"}, Spec: speech()},
		{Name: "c", Needs: []string{"a"}, Spec: &jobspec.Spec{Kind: jobspec.KindCompute, Compute: &jobspec.Compute{
			Inputs: []jobspec.ComputeInput{{Ref: &jobspec.ArtifactRef{Step: "a", Artifact: "result-1"}, To: "/x"}}}}},
		{Name: "d", Needs: []string{"b", "c"}, Spec: speech()}, {Name: "e", Spec: speech()},
	}}
	steps := func(statuses string) []state.PipelineStep {
		var out []state.PipelineStep
		for i, st := range strings.Fields(statuses) {
			out = append(out, state.PipelineStep{Name: p.Steps[i].Name, JobID: "p--" + p.Steps[i].Name, Status: state.Status(st)})
		}
		return out
	}
	rec := func(status state.Status, arts ...string) *state.Record {
		r := &state.Record{Status: status}
		for _, a := range arts {
			r.Artifacts = append(r.Artifacts, state.Artifact{Key: "k/" + a, URL: "s3://b/k/" + a})
		}
		return r
	}
	names := func(idx []int) string {
		var out []string
		for _, i := range idx {
			out = append(out, p.Steps[i].Name)
		}
		return strings.Join(out, ",")
	}
	status := func(pl pipelinePlan) string {
		var out []string
		for _, s := range pl.steps {
			out = append(out, string(s.Status))
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		name      string
		policy    jobspec.OnFailure
		steps     string
		seen      []*state.Record
		cancelled bool
		publish   string
		cancel    string
		want      string
		end       string // "" running, "ok", or the error's code
	}{
		{name: "roots first", steps: "waiting waiting waiting waiting waiting", seen: make([]*state.Record, 5),
			publish: "a,e", want: "queued waiting waiting waiting queued"},
		{name: "a record moves a step on, its children wait", steps: "queued waiting waiting waiting queued",
			seen: []*state.Record{rec(state.StatusRunning), nil, nil, nil, nil}, want: "running waiting waiting waiting queued"},
		{name: "a's end publishes b; c's input is missing", steps: "running waiting waiting waiting queued",
			seen: []*state.Record{rec(state.StatusSucceeded, "result-0.mp3"), nil, nil, nil, nil}, policy: jobspec.OnFailureFinish,
			publish: "b", want: "succeeded queued failed skipped queued"},
		{name: "stop: a failure cancels what runs and skips the rest", steps: "succeeded running waiting waiting running",
			seen:   []*state.Record{nil, rec(state.StatusFailed), nil, nil, nil},
			cancel: "e", want: "succeeded failed skipped skipped running"},
		{name: "cancel: running ones cancelled, waiting ones skipped", steps: "running waiting waiting waiting queued",
			seen: make([]*state.Record, 5), cancelled: true, cancel: "a,e", want: "running skipped skipped skipped queued"},
		{name: "everything ended after a cancel", steps: "cancelled skipped skipped skipped cancelled",
			seen: make([]*state.Record, 5), cancelled: true, want: "cancelled skipped skipped skipped cancelled", end: "cancelled"},
		{name: "a failure ends the pipeline failed", steps: "succeeded failed skipped skipped succeeded",
			seen: make([]*state.Record, 5), want: "succeeded failed skipped skipped succeeded", end: CodeStepFailed},
		{name: "all succeeded", steps: "succeeded succeeded succeeded succeeded succeeded",
			seen: make([]*state.Record, 5), want: "succeeded succeeded succeeded succeeded succeeded", end: "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.OnFailure = tt.policy
			pl := planPipeline(p, steps(tt.steps), tt.seen, tt.cancelled)
			if got := status(pl); got != tt.want {
				t.Errorf("steps %s, want %s", got, tt.want)
			}
			if got := names(pl.publish); got != tt.publish {
				t.Errorf("publish %q, want %q", got, tt.publish)
			}
			if got := names(pl.cancel); got != tt.cancel {
				t.Errorf("cancel %q, want %q", got, tt.cancel)
			}
			var f *failure
			switch {
			case tt.end == "" && pl.done, tt.end != "" && !pl.done:
				t.Errorf("done %v, want end %q", pl.done, tt.end)
			case tt.end == "ok" && pl.end != nil:
				t.Errorf("end %v, want success", pl.end)
			case tt.end == "cancelled" && !errors.Is(pl.end, errCancelled):
				t.Errorf("end %v, want cancelled", pl.end)
			case tt.end == CodeStepFailed && (!errors.As(pl.end, &f) || f.code != CodeStepFailed):
				t.Errorf("end %v, want %s", pl.end, CodeStepFailed)
			}
		})
	}
	// Planning never changes the steps it is given.
	in := steps("queued waiting waiting waiting queued")
	before := slices.Clone(in)
	planPipeline(p, in, []*state.Record{rec(state.StatusSucceeded, "result-0"), nil, nil, nil, nil}, false)
	if !slices.EqualFunc(in, before, func(a, b state.PipelineStep) bool {
		return a.Status == b.Status && len(a.Artifacts) == len(b.Artifacts)
	}) {
		t.Error("planPipeline changed its input")
	}
}
