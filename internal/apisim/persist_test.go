package apisim_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// A compute simulator with a state file that is restarted still knows
// the jobs it accepted: a running job runs on and completes, and was
// submitted once.
func TestComputeSimStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	root, file := t.TempDir(), filepath.Join(t.TempDir(), "sim", "compute.json")
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.Root, c.StateFile = root, file })
	tok, _ := b.tokens(t)
	id := b.submit(t, tok, "resume", "#SIM queuedfor 10s\n#SIM runfor 1m\necho resumed\n", nil)
	b.clock.Advance(20 * time.Second)
	if d, _ := b.job(t, tok, id); d.JobStatus != "statR" {
		t.Fatalf("before the restart: %+v", d)
	}

	// The restart: a new simulator on the same files and clock.
	sim := apisim.NewCompute(apisim.ComputeConfig{
		User: csUser, Password: csPass, OrgID: csOrg, QueuedFor: 10 * time.Second, RunFor: time.Minute,
		Now: b.clock.Now, Root: root, StateFile: file, HistoryDelay: time.Hour,
	})
	if err := sim.StateErr(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	b2 := &csBundle{sim: sim, srv: srv, clock: b.clock}
	tok2, _ := b2.tokens(t)
	if d, a := b2.job(t, tok2, id); d.JobStatus != "statR" {
		t.Fatalf("after the restart: %s", a.raw)
	}
	b.clock.Advance(time.Minute)
	d, a := b2.job(t, tok2, id)
	if d.JobStatus != "statC" || d.ExitCode == nil || *d.ExitCode != "0" {
		t.Fatalf("after the run: %s", a.raw)
	}
	if out, ok := sim.File(d.OutputPath); !ok || !strings.HasSuffix(string(out), "\nresumed\n") {
		t.Errorf("stdout %q, %v", out, ok)
	}
	if n := sim.SubmitCount("resume"); n != 1 {
		t.Errorf("submit count after the restart = %d, want 1", n)
	}
	// A new job gets a new id.
	if id2 := b2.submit(t, tok2, "next", "echo x\n", nil); id2 == id {
		t.Errorf("the restarted simulator reused job id %s", id)
	}
}

// A media simulator with a state file that is restarted still answers for
// its tasks.
func TestMediaSimStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "media.json")
	b := setupSim(t, apisim.MediaConfig{StateFile: file})
	task := b.submitVideo(t, "a boat [sim:count=2]")
	b.clock.Advance(3 * time.Second)

	sim := apisim.NewMedia(apisim.MediaConfig{APIKey: simKey, Now: b.clock.Now, TaskDuration: 10 * time.Second,
		PendingFor: 2 * time.Second, ResultSize: 1000, StateFile: file})
	if err := sim.StateErr(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	b2 := &simBundle{sim: sim, srv: srv, clock: b.clock}
	if got := b2.getTask(t, task.Output.TaskID); got.Output.TaskStatus != "running" {
		t.Fatalf("after the restart: %+v", got.Output)
	}
	b.clock.Advance(10 * time.Second)
	got := b2.getTask(t, task.Output.TaskID)
	if got.Output.TaskStatus != "succeeded" || len(got.Output.Results) != 2 || !strings.HasPrefix(got.Output.Results[0], srv.URL) {
		t.Fatalf("after the run: %+v", got.Output)
	}
	if n := sim.SubmitCount("a boat [sim:count=2]"); n != 1 {
		t.Errorf("submit count after the restart = %d, want 1", n)
	}
}

// A state file that cannot be read is reported, not silently dropped.
func TestSimStateFileCorrupt(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(file, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := apisim.NewMedia(apisim.MediaConfig{StateFile: file}).StateErr(); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("media: %v", err)
	}
	c := apisim.NewCompute(apisim.ComputeConfig{StateFile: file, Root: t.TempDir()})
	if err := c.StateErr(); err == nil || !strings.Contains(err.Error(), "remove it to start afresh") {
		t.Errorf("compute: %v", err)
	}
}
