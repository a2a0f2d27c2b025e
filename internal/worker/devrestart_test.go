package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/worker"
)

// A compute job the platform has never shown (its id was recorded at
// submit, then the platform lost it) fails job_vanished with a message
// that says so, after a few polls, instead of "seen unknown".
func TestComputeJobUnknownToThePlatformVanishes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.leaveRecord(t, "ghost-1", func(r *state.Record) {
		now := time.Now().UTC()
		r.Kind, r.Status, r.Submits, r.SubmittedAt = "compute", state.StatusSubmitted, 1, &now
		r.Upstream = state.Upstream{ClusterID: "1001", JobID: "999999"}
	})
	b.start(t)
	b.publish(t, "compute", "ghost-1", computeSpec(t, b, "ghost-1", "#!/bin/sh\necho never\n"))
	ev := b.await(t, "ghost-1", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeJobVanished {
		t.Fatalf("event: %+v", ev.Data)
	}
	msg := ev.Data.Error.Message
	if !strings.Contains(msg, "job 999999, accepted at submit, is unknown to the platform (not found 3 times in a row)") || strings.Contains(msg, "seen unknown") {
		t.Errorf("message %q", msg)
	}
}

// A dev worker (SLUICE_DEV) that restarts while its compute job runs
// resumes it: the simulators keep their state under SLUICE_DATA_DIR, so the
// job is still known, completes, and was submitted once.
func TestDevWorkerRestartResumesComputeJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	cfg := b.cfg
	// Any free port for the S3 store too: its default, 7070, may be held
	// (TestDemo in internal/demo holds it while packages run in parallel).
	cfg.Dev, cfg.DataDir, cfg.DevNATSPort, cfg.DevS3Addr = true, t.TempDir(), -1, "127.0.0.1:0"
	cfg.NATSURL, cfg.S3Endpoint, cfg.S3Bucket, cfg.S3AccessKeyID, cfg.S3SecretAccessKey = "", "", "", "", ""
	cfg.MediaBaseURL, cfg.ComputeBaseURL = "", ""
	cfg.DevSimComputeTime = 4 * time.Second
	// The scheduler script, straight into the simulated cluster's files.
	dir := "/public/home/dev/resume"
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "compute", dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.DataDir, "compute", dir, "run.sh"), []byte("#!/bin/sh\necho resumed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := `{"id":"dev-resume","kind":"compute","compute":{"template":{"type":"BASIC","name":"BASE"},
		"job":{"name":"dev-resume","queue":"normal","nodes":1,"ppn":2,"wall_time":"00:10:00","work_dir":"` + dir + `","script":"` + dir + `/run.sh"}}}`

	run := func() (worker.Endpoints, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		ready := make(chan worker.Endpoints, 1)
		done := make(chan error, 1)
		go func() {
			done <- worker.Run(ctx, cfg, logging.New(b.logs, "json", "debug"), func(ep worker.Endpoints) { ready <- ep })
		}()
		stop := func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker: %v", err)
			}
		}
		select {
		case ep := <-ready:
			return ep, stop
		case err := <-done:
			t.Fatalf("dev worker did not start: %v", err)
		case <-time.After(30 * time.Second):
			cancel()
			t.Fatal("dev worker did not start")
		}
		return worker.Endpoints{}, nil
	}
	// connect points the bundle's helpers at the dev worker's NATS.
	connect := func(ep worker.Endpoints) {
		b.useNATS(t, ep.NATSURL)
	}

	ep, stop := run()
	connect(ep)
	b.publish(t, "compute", "dev-resume", spec)
	b.awaitStatus(t, "dev-resume", state.StatusRunning, 30*time.Second)
	stop()

	ep, stop = run()
	defer stop()
	connect(ep)
	ev := b.await(t, "dev-resume", 60*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("after the restart: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if rec := b.record(t, "dev-resume"); rec.Submits != 1 || rec.Attempts < 2 {
		t.Errorf("submits %d, attempts %d; want one submit over two deliveries", rec.Submits, rec.Attempts)
	}
}
