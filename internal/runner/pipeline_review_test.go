package runner

import (
	"os"
	"testing"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestFindArtifactExactNameFirst: a compute step whose outputs are
// a.tar.gz and a.tar feeds a reference to a.tar with a.tar, not with
// a.tar.gz (whose name without extension is a.tar too), whatever their
// order.
func TestFindArtifactExactNameFirst(t *testing.T) {
	arts := []state.Artifact{{Key: "p/stdout.txt"}, {Key: "p/a.tar.gz"}, {Key: "p/a.tar"}, {Key: "p/result-0.mp3"}}
	for name, want := range map[string]string{"a.tar": "p/a.tar", "a.tar.gz": "p/a.tar.gz", "result-0": "p/result-0.mp3", "stdout.txt": "p/stdout.txt"} {
		if a, ok := findArtifact(arts, name); !ok || a.Key != want {
			t.Errorf("findArtifact(%q) = %q %v, want %q", name, a.Key, ok, want)
		}
	}
}

// TestStepSpecDecodes: every step of the example pipeline, published with
// its references resolved, is a valid job spec of its kind with its step
// id, its pipeline's tenant and labels and the pipeline label.
func TestStepSpecDecodes(t *testing.T) {
	data, err := os.ReadFile("../jobspec/testdata/examples/pipeline.json")
	if err != nil {
		t.Fatal(err)
	}
	p, err := jobspec.Decode(data, jobspec.KindPipeline)
	if err != nil {
		t.Fatal(err)
	}
	steps := []state.PipelineStep{
		{Name: "voice", Status: state.StatusSucceeded, Artifacts: []state.Artifact{{URL: "s3://bkt/k/voice/result-0.mp3", Key: "k/voice/result-0.mp3"}}},
		{Name: "train", Status: state.StatusSucceeded, Artifacts: []state.Artifact{{URL: "s3://bkt/k/train/model.bin", Key: "k/train/model.bin"}}},
		{Name: "render", Status: state.StepQueued},
	}
	for _, st := range p.Pipeline.Steps {
		id := jobspec.StepID("promo-42", st.Name)
		out, err := stepSpec(p, id, st, steps)
		if err != nil {
			t.Fatalf("%s: %v", st.Name, err)
		}
		s, err := jobspec.Decode(out, st.Spec.Kind)
		if err != nil {
			t.Fatalf("%s: %v\n%s", st.Name, err, out)
		}
		if s.ID != id || s.Tenant != "acme" || s.Labels["pipeline"] != "promo-42" || s.Labels["campaign"] != "spring" {
			t.Errorf("%s: %+v", st.Name, s)
		}
	}
}
