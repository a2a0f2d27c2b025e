package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// TestRiverPeerResumesAfterRestart checks the River peer's claim in
// BENCHMARKS.md: the task id it stores as a resumable cursor with its
// snooze lets a restarted worker wait for the paid task instead of paying
// again. One job with a 10 s task: a worker submits it and queries it at
// least once, is stopped (SIGTERM, River's graceful stop) while the task
// runs, and a second worker completes the job with no second submit.
// It builds bench/riverpeer (its own module) and needs Debian's Postgres;
// it skips without it.
func TestRiverPeerResumesAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short: builds bench/riverpeer and starts Postgres")
	}
	pgBin, err := FindPostgresBin(DefaultPostgresBin)
	if err != nil {
		t.Skipf("skipping: %v", err)
	}
	ctx := t.Context()
	dir := t.TempDir()
	bin := filepath.Join(dir, "riverpeer")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "bench", "riverpeer")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build bench/riverpeer: %v\n%s", err, out)
	}
	pg, err := startPostgres(ctx, pgBin, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.stop)
	store, err := s3dev.Start(ctx, s3dev.Config{Dir: filepath.Join(dir, "s3"), Buckets: []string{bucket}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	media, sim, simURL, err := startSimulator(apisim.MediaConfig{ResultSize: 1 << 10}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopSimulator(sim) })
	pr := &peerRun{riverBin: bin, pg: pg, simURL: simURL, s3Endpoint: store.Endpoint(), media: media}
	if _, _, err := pr.riverpeer(ctx, dir, "db", "", "db", "-url", pg.url, "-create", "resume"); err != nil {
		t.Fatal(err)
	}
	waitFlags := []string{"-first-wait", "50ms", "-poll-every", "200ms"}
	w1, err := pr.startRiverWorker(ctx, dir, "worker-1", "resume", waitFlags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w1.stop(5 * time.Second) })
	const directives = "[sim:duration=10s]"
	drive, err := startProcess("drive", bin, []string{"drive", "-db", pg.dbURL("resume"), "-n", "1", "-prefix", "resume",
		"-directives", directives, "-timeout", "2m"}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drive.stop(5 * time.Second) })
	// A query means the job came back from its first snooze with the
	// cursor: the task id was stored.
	deadline := time.Now().Add(time.Minute)
	for media.Counters().Requests(apisim.EndpointTask) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no task query within a minute; see %s", w1.log.Name())
		}
		time.Sleep(20 * time.Millisecond)
	}
	w1.stop(30 * time.Second)
	if w1.err != nil {
		t.Fatalf("first worker's stop: %v; see %s", w1.err, w1.log.Name())
	}
	if n := media.Counters().Requests(apisim.EndpointResult); n != 0 {
		t.Fatalf("the first worker downloaded %d results: the job ended before the restart", n)
	}
	w2, err := pr.startRiverWorker(ctx, dir, "worker-2", "resume", waitFlags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w2.stop(5 * time.Second) })
	line, err := drive.line(ctx, "RESULT", 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var res riverResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatal(err)
	}
	if res.Completed != 1 || res.Unsuccessful != 0 {
		t.Fatalf("result %s; want the job completed; see %s and %s", line, w1.log.Name(), w2.log.Name())
	}
	prompt := "a paper boat drifting down a rain gutter, job resume-00000 " + directives
	if n := media.SubmitCount(prompt); n != 1 {
		t.Fatalf("the task was submitted %d times, want once", n)
	}
}
