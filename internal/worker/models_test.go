package worker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// modelVideoSpec is a text-to-video spec for model at resolution.
func modelVideoSpec(id, prompt, model, resolution string) map[string]any {
	spec := videoSpec(id, prompt)
	spec["video"].(map[string]any)["model"] = model
	spec["video"].(map[string]any)["parameters"] = map[string]any{"resolution": resolution, "duration": 5, "ratio": "16:9"}
	return spec
}

// usageResolution is the resolution upstream reports it was sent.
func usageResolution(t *testing.T, usage json.RawMessage) string {
	t.Helper()
	var u struct {
		Resolution string `json:"resolution"`
	}
	if err := json.Unmarshal(usage, &u); err != nil {
		t.Fatalf("usage %s: %v", usage, err)
	}
	return u.Resolution
}

// TestVideoOfPublicClientsRunsEndToEnd: a request copied from a public
// client (a model it uses at 720P/1080p, whatever the case) runs against
// the simulator, which like the platform takes only its spelling (720p):
// the value sent upstream is the platform's, and the video is priced by
// the catalog resolution's rule video.<resolution>.second.
func TestVideoOfPublicClientsRunsEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	if out, code := b.enqueue(t, "", "prices", "set", "video.720p.second=1", "video.1080p.second=3"); code != 0 {
		t.Fatalf("enqueue prices set: exit %d: %s", code, out)
	}
	for _, tc := range []struct {
		id, model, res, sent string
		cost                 float64
	}{
		{"pub-720", "Seedance2.0", "720P", "720p", 5},
		{"pub-1080", "HappyHorse-1.0-T2V", "1080p", "1080p", 15},
	} {
		b.publish(t, "video", tc.id, modelVideoSpec(tc.id, "a boat at "+tc.res+" [sim:duration=0s]", tc.model, tc.res))
		ev := b.await(t, tc.id, 30*time.Second)
		if ev.Data.Status != string(state.StatusSucceeded) {
			t.Fatalf("%s: %s %+v", tc.id, ev.Data.Status, ev.Data.Error)
		}
		if got := usageResolution(t, ev.Data.Usage); got != tc.sent {
			t.Errorf("%s: upstream was sent resolution %q, want %q", tc.id, got, tc.sent)
		}
		if ev.Data.Cost == nil || *ev.Data.Cost != tc.cost {
			t.Errorf("%s: cost %v, want %v", tc.id, ev.Data.Cost, tc.cost)
		}
	}
}

// TestUnknownModelIsWarnedAndChecked: a model the catalog does not name
// runs when its values are the default entry's, with a warning naming
// it; 4K for it is refused before anything is paid, naming the field.
func TestUnknownModelIsWarnedAndChecked(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	b.publish(t, "video", "next-ok", modelVideoSpec("next-ok", "next model [sim:duration=0s]", "video-model-next", "768P"))
	if ev := b.await(t, "next-ok", 30*time.Second); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("next-ok: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if !strings.Contains(b.logs.String(), "video-model-next") || !strings.Contains(b.logs.String(), "not in the model catalog") {
		t.Error("no warning naming the unknown model in the worker's log")
	}
	b.publish(t, "video", "next-4k", modelVideoSpec("next-4k", "next model at 4K", "video-model-next", "4K"))
	ev := b.await(t, "next-4k", 30*time.Second)
	if ev.Data.Error == nil || ev.Data.Error.Code != "invalid_spec" || !strings.Contains(ev.Data.Error.Message, "video.parameters.resolution") {
		t.Errorf("4K: %s %+v, want invalid_spec naming video.parameters.resolution", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("next model at 4K"); n != 0 {
		t.Errorf("4K was submitted %d times", n)
	}
}

// TestBadModelCatalogStopsStart: a catalog file with an unknown field
// stops the worker at start, naming the variable and the line, both
// through the configuration's check and through Run itself.
func TestBadModelCatalogStopsStart(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	p := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(p, []byte("{\n  \"models\": {\n    \"X\": {\"fps\": 24}\n  }\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := b.cfg
	cfg.MediaModels = p
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "SLUICE_MEDIA_MODELS") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("Validate: %v, want SLUICE_MEDIA_MODELS and line 3", err)
	}
	_, done, _ := b.launch(t, cfg)
	select {
	case err := <-done:
		done <- nil // for the cleanup's stop, which reports what it gets
		if err == nil || !strings.Contains(err.Error(), "line 3") || !strings.Contains(err.Error(), `unknown field "fps"`) {
			t.Errorf("Run: %v, want the line and the field named", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the worker started with a bad catalog")
	}
}

// TestEnqueueModelsShowsTheCatalogInForce: before any worker, enqueue
// models shows the shipped catalog and says so; once a worker started with
// an operator's file, it shows that catalog, with the file's models.
func TestEnqueueModelsShowsTheCatalogInForce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	out, code := b.enqueue(t, "", "models")
	if code != 0 || !strings.Contains(out, "shipped") || !strings.Contains(out, "HappyHorse-1.0-T2V") || !strings.Contains(out, "video.1080p.second") {
		t.Fatalf("enqueue models before any worker: exit %d:\n%s", code, out)
	}
	p := filepath.Join(t.TempDir(), "models.json")
	body := `{"models": {"Studio-X": {"resolutions": ["4K"], "durations": {"min": 5, "max": 30}, "ratios": ["16:9"], "inputs": ["text_to_video"]}}}`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	b.start(t, func(c *config.Config) { c.MediaModels = p })
	out, code = b.enqueue(t, "", "models")
	if code != 0 || !strings.Contains(out, "Studio-X") || !strings.Contains(out, "4K") || !strings.Contains(out, "test-worker") {
		t.Fatalf("enqueue models: exit %d:\n%s", code, out)
	}
	out, code = b.enqueue(t, "", "models", "--json")
	var got struct {
		Source  string `json:"source"`
		Worker  string `json:"worker"`
		Catalog struct {
			Models map[string]struct {
				Resolutions []string          `json:"resolutions"`
				Prices      map[string]string `json:"prices"`
			} `json:"models"`
		} `json:"catalog"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("enqueue models --json: exit %d, %v:\n%s", code, err, out)
	}
	if got.Source != "file" || got.Worker != "test-worker" || got.Catalog.Models["Studio-X"].Prices["4K"] != "video.4K.second" {
		t.Errorf("enqueue models --json = %+v", got)
	}
	if _, ok := got.Catalog.Models["Seedance2.0"]; !ok {
		t.Error("the file extends the shipped catalog, yet Seedance2.0 is gone")
	}
	// The price table takes the rules of the catalog in force.
	if out, code := b.enqueue(t, "", "prices", "set", "video.4K.second=9"); code != 0 {
		t.Errorf("enqueue prices set video.4K.second: exit %d: %s", code, out)
	}
}

// TestCatalogChangeSparesJobsUpstream: a job whose task runs upstream
// (submitted by a worker under the old catalog) still goes on when the
// catalog the worker restarts with no longer takes its values: its paid
// result is collected, not failed invalid_spec. A new job with the same
// values is refused before anything is paid.
func TestCatalogChangeSparesJobsUpstream(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	prompt := "a harbour at 1080p [sim:duration=0s]"
	media, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: b.simURL, APIKey: secretMediaKey})
	if err != nil {
		t.Fatal(err)
	}
	task, err := media.SubmitVideo(testenv.Context(t, 10*time.Second), apiclient.VideoRequest{Model: "Seedance2.0",
		Input: apiclient.VideoInput{Prompt: prompt}, Parameters: apiclient.VideoParameters{Resolution: "1080p", Duration: 5, Ratio: "16:9"}})
	if err != nil {
		t.Fatal(err)
	}
	b.leaveRecord(t, "in-flight", func(r *state.Record) {
		now := time.Now().UTC()
		r.Kind, r.Status, r.Submits, r.SubmittedAt = "video", state.StatusSubmitted, 1, &now
		r.Upstream = state.Upstream{TaskID: task.Output.TaskID, RequestID: task.RequestID, Status: string(task.Output.TaskStatus)}
	})
	p := filepath.Join(t.TempDir(), "models.json")
	body := `{"models": {"Seedance2.0": {"resolutions": ["720p"], "durations": {"min": 4, "max": 15}, "ratios": ["16:9"], "inputs": ["text_to_video"]}}}`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	b.start(t, func(c *config.Config) { c.MediaModels = p })
	b.publish(t, "video", "in-flight", modelVideoSpec("in-flight", prompt, "Seedance2.0", "1080p"))
	if ev := b.await(t, "in-flight", 30*time.Second); ev.Data.Status != string(state.StatusSucceeded) || len(ev.Data.Artifacts) != 1 {
		t.Errorf("job upstream under the old catalog: %s %+v, want succeeded with its artifact", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	b.publish(t, "video", "fresh", modelVideoSpec("fresh", "a fresh harbour", "Seedance2.0", "1080p"))
	if ev := b.await(t, "fresh", 30*time.Second); ev.Data.Error == nil || ev.Data.Error.Code != "invalid_spec" {
		t.Errorf("new job under the new catalog: %s %+v, want invalid_spec", ev.Data.Status, ev.Data.Error)
	}
}
