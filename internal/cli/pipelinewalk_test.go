package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestPipelineStepsShowTheirArtifacts: status and --wait of a pipeline
// print where each step's results are, not only how many there are, so a
// user finds the final video without looking each step up.
func TestPipelineStepsShowTheirArtifacts(t *testing.T) {
	t.Parallel()
	art := state.Artifact{URL: "s3://sluice/sluice/container/p-1--render/out.mp4", Size: 1024, SHA256: "abc"}
	j := &jobclient.Job{ID: "p-1", Kind: "pipeline", Status: "succeeded", Steps: []state.PipelineStep{
		{Name: "voice", JobID: "p-1--voice", Status: "succeeded"},
		{Name: "render", JobID: "p-1--render", Status: "succeeded", Artifacts: []state.Artifact{art}},
	}}
	var status, wait bytes.Buffer
	printStatus(&status, j)
	printJobLine(&wait, j)
	for name, out := range map[string]string{"status": status.String(), "wait": wait.String()} {
		if !strings.Contains(out, art.URL+"  1024 bytes  sha256 abc") {
			t.Errorf("%s output lacks the step's artifact:\n%s", name, out)
		}
	}
}

// TestPipelineFileWithoutFlagSaysUseF: `enqueue pipeline promo.json`
// (or submit) tells the user to write -f before the file.
func TestPipelineFileWithoutFlagSaysUseF(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"pipeline", "submit"} {
		code, _, stderr := runCLIWith(t, nil, cmd, "promo.json")
		if code != ExitUsage || !strings.Contains(stderr, `did you mean enqueue `+cmd+` -f promo.json?`) {
			t.Errorf("%s promo.json: exit %d, stderr %q", cmd, code, stderr)
		}
	}
}
