package apisim_test

import (
	"encoding/json"
	"net/http"
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

// A compute simulator with a state file that is restarted still knows its
// container instances: a running one runs on and completes, the counters
// of created and deleted instances go on, a delete after the restart
// leaves none alive, and a new instance gets a new id.
func TestContainerSimStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	root, file := t.TempDir(), filepath.Join(t.TempDir(), "sim", "compute.json")
	b := setupComputeSim(t, func(c *apisim.ComputeConfig) { c.Root, c.StateFile = root, file })
	tok, _ := b.tokens(t)
	create := func(b *csBundle, tok, name string) string {
		t.Helper()
		body := `{"instanceServiceName":"` + name + `","taskType":"ssh","acceleratorType":"gpu","version":"torch:2.1",
			"imagePath":"reg:5000/gpu/torch:2.1","resourceGroup":"TeslaM40","cpuNumber":4,"gpuNumber":1,"ramSize":1024,
			"taskNumber":1,"timeoutLimit":"01:00:00","useStartScript":true,"startScriptActionScope":"all",
			"startScriptContent":"#SIM complete\necho hi\n"}`
		a := b.postJSON(t, ctrBase+"/task", tok, body)
		var id string
		if a.Code != "0" || json.Unmarshal(a.Data, &id) != nil || id == "" {
			t.Fatalf("create: %s", a.raw)
		}
		return id
	}
	status := func(b *csBundle, tok, id string) string {
		t.Helper()
		a := b.get(t, ctrBase+"/"+id+"/detail", tok)
		var d struct{ Status string }
		if a.Code != "0" || json.Unmarshal(a.Data, &d) != nil {
			t.Fatalf("detail: %s", a.raw)
		}
		return d.Status
	}
	id := create(b, tok, "sluice-kept")
	b.clock.Advance(20 * time.Second)
	if s := status(b, tok, id); s != "Running" {
		t.Fatalf("before the restart: %s", s)
	}

	// The restart: a new simulator on the same files and clock.
	sim := apisim.NewCompute(apisim.ComputeConfig{
		User: csUser, Password: csPass, OrgID: csOrg, QueuedFor: 10 * time.Second, RunFor: time.Minute,
		Now: b.clock.Now, Root: root, StateFile: file,
	})
	if err := sim.StateErr(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	b2 := &csBundle{sim: sim, srv: srv, clock: b.clock}
	tok, _ = b2.tokens(t)
	if s := status(b2, tok, id); s != "Running" {
		t.Fatalf("after the restart: %s", s)
	}
	b.clock.Advance(time.Minute)
	if s := status(b2, tok, id); s != "Completed" {
		t.Fatalf("after the run: %s", s)
	}
	if created, deleted, alive := sim.ContainerCounts(); created != 1 || deleted != 0 || alive != 1 {
		t.Errorf("after the restart: created %d, deleted %d, alive %d", created, deleted, alive)
	}
	id2 := create(b2, tok, "sluice-next")
	if id2 == id {
		t.Errorf("the restarted simulator reused instance id %s", id)
	}
	if a := b2.do(t, http.MethodDelete, ctrBase+"/task?ids="+id+"&ids="+id2, map[string]string{"token": tok}, nil, "application/json"); a.Code != "0" {
		t.Fatalf("delete: %s", a.raw)
	}
	if created, deleted, alive := sim.ContainerCounts(); created != 2 || deleted != 2 || alive != 0 {
		t.Errorf("after the delete: created %d, deleted %d, alive %d", created, deleted, alive)
	}

	// Restarted once more: the deleted instances stay deleted.
	sim3 := apisim.NewCompute(apisim.ComputeConfig{User: csUser, Password: csPass, OrgID: csOrg, Now: b.clock.Now, Root: root, StateFile: file})
	if err := sim3.StateErr(); err != nil {
		t.Fatal(err)
	}
	if created, deleted, alive := sim3.ContainerCounts(); created != 2 || deleted != 2 || alive != 0 || len(sim3.ContainersTwiceAlive()) != 0 ||
		sim3.ContainerCreates("sluice-kept") != 1 {
		t.Errorf("after the second restart: created %d, deleted %d, alive %d", created, deleted, alive)
	}
}

const ctrBase = "/ai/openapi/v2/instance-service"
