package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// planDiamond is a diamond (a; b and c need a; d needs b and c) plus an
// independent e; c takes a's result-1 as an input.
func planDiamond() *jobspec.Pipeline {
	speech := func() *jobspec.Spec { return &jobspec.Spec{Kind: jobspec.KindSpeech} }
	return &jobspec.Pipeline{Steps: []jobspec.Step{
		{Name: "a", Spec: speech()}, {Name: "b", Needs: []string{"a"}, Spec: speech()},
		{Name: "c", Needs: []string{"a"}, Spec: &jobspec.Spec{Kind: jobspec.KindCompute, Compute: &jobspec.Compute{
			Inputs: []jobspec.ComputeInput{{Ref: &jobspec.ArtifactRef{Step: "a", Artifact: "result-1"}, To: "/x"}}}}},
		{Name: "d", Needs: []string{"b", "c"}, Spec: speech()}, {Name: "e", Spec: speech()},
	}}
}

// planSteps are p's recorded steps at statuses (one word each).
func planSteps(p *jobspec.Pipeline, statuses string) []state.PipelineStep {
	var out []state.PipelineStep
	for i, st := range strings.Fields(statuses) {
		out = append(out, state.PipelineStep{Name: p.Steps[i].Name, JobID: "p--" + p.Steps[i].Name, Status: state.Status(st)})
	}
	return out
}

// planRec is a step's record at status with artifacts named arts.
func planRec(status state.Status, arts ...string) *state.Record {
	r := &state.Record{Status: status}
	for _, a := range arts {
		r.Artifacts = append(r.Artifacts, state.Artifact{Key: "k/" + a, URL: "s3://b/k/" + a})
	}
	return r
}

// planNames names the steps idx of p.
func planNames(p *jobspec.Pipeline, idx []int) string {
	var out []string
	for _, i := range idx {
		out = append(out, p.Steps[i].Name)
	}
	return strings.Join(out, ",")
}

// planCase is one decision: the recorded steps, their records, the cancel
// flag; what is published and cancelled, the steps after, how it ends
// ("" running, "ok", "cancelled" or the error's code).
type planCase struct {
	name                       string
	policy                     jobspec.OnFailure
	steps                      string
	seen                       []*state.Record
	cancelled                  bool
	publish, cancel, want, end string
}

var planCases = []planCase{
	{name: "roots first", steps: "waiting waiting waiting waiting waiting", seen: make([]*state.Record, 5),
		publish: "a,e", want: "queued waiting waiting waiting queued"},
	{name: "a record short of its end leaves its step queued", steps: "queued waiting waiting waiting queued",
		seen: []*state.Record{planRec(state.StatusRunning), nil, nil, nil, nil}, want: "queued waiting waiting waiting queued"},
	{name: "a's end publishes b; c's input is missing", steps: "queued waiting waiting waiting queued",
		seen: []*state.Record{planRec(state.StatusSucceeded, "result-0.mp3"), nil, nil, nil, nil}, policy: jobspec.OnFailureFinish,
		publish: "b", want: "succeeded queued failed skipped queued"},
	{name: "stop: a failure cancels what runs and skips the rest", steps: "succeeded queued waiting waiting queued",
		seen: []*state.Record{nil, planRec(state.StatusFailed), nil, nil, nil}, cancel: "e", want: "succeeded failed skipped skipped queued"},
	{name: "cancel: running ones cancelled, waiting ones skipped", steps: "queued waiting waiting waiting queued",
		seen: make([]*state.Record, 5), cancelled: true, cancel: "a,e", want: "queued skipped skipped skipped queued"},
	{name: "everything ended after a cancel", steps: "cancelled skipped skipped skipped cancelled",
		seen: make([]*state.Record, 5), cancelled: true, want: "cancelled skipped skipped skipped cancelled", end: "cancelled"},
	{name: "a failure ends the pipeline failed", steps: "succeeded failed skipped skipped succeeded",
		seen: make([]*state.Record, 5), want: "succeeded failed skipped skipped succeeded", end: CodeStepFailed},
	{name: "all succeeded", steps: "succeeded succeeded succeeded succeeded succeeded",
		seen: make([]*state.Record, 5), want: "succeeded succeeded succeeded succeeded succeeded", end: "ok"},
}

// TestPlanPipeline walks planPipeline's decisions on planDiamond.
func TestPlanPipeline(t *testing.T) {
	t.Parallel()
	for _, tt := range planCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := planDiamond()
			p.OnFailure = tt.policy
			pl := planPipeline(p, planSteps(p, tt.steps), tt.seen, tt.cancelled)
			var got []string
			for _, s := range pl.steps {
				got = append(got, string(s.Status))
			}
			if strings.Join(got, " ") != tt.want || planNames(p, pl.publish) != tt.publish || planNames(p, pl.cancel) != tt.cancel {
				t.Errorf("steps %v, publish %q, cancel %q; want %s, %q, %q", got, planNames(p, pl.publish), planNames(p, pl.cancel), tt.want, tt.publish, tt.cancel)
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
}

// TestPlanPipelineLeavesItsInput: planning never changes the steps it is
// given.
func TestPlanPipelineLeavesItsInput(t *testing.T) {
	t.Parallel()
	p := planDiamond()
	in := planSteps(p, "queued waiting waiting waiting queued")
	before := slices.Clone(in)
	planPipeline(p, in, []*state.Record{planRec(state.StatusSucceeded, "result-0"), nil, nil, nil, nil}, false)
	for i := range in {
		if in[i].Status != before[i].Status || len(in[i].Artifacts) != len(before[i].Artifacts) {
			t.Errorf("step %d changed: %+v, was %+v", i, in[i], before[i])
		}
	}
}
