package worker_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/devstack"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/worker"
)

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestDevStoreServesPlacedFiles: the embedded default's S3 store listens on
// SLUICE_DEV_S3_ADDR, and a file a user puts under
// <SLUICE_DATA_DIR>/s3/buckets/sluice/ is an input a job can name as
// s3://sluice/<key>.
func TestDevStoreServesPlacedFiles(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	dataDir := t.TempDir()
	for key, body := range map[string]string{
		"scripts/placed.sh": "#!/bin/sh\necho placed\ncp params.nml params-copy.nml\n",
		"inputs/params.nml": "placed=1\n",
	} {
		p := filepath.Join(dataDir, "s3", "buckets", devstack.Bucket, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	addr := freeAddr(t)
	ep := startDev(t, b, dataDir, addr)
	if ep.S3Endpoint != "http://"+addr || ep.S3Bucket != devstack.Bucket {
		t.Fatalf("endpoints %+v, want the store on %s with bucket %s", ep, addr, devstack.Bucket)
	}

	// Talk to the embedded NATS as the bundle's helpers do.
	b.useNATS(t, ep.NATSURL)
	dir := "/public/home/" + devstack.ComputeUser + "/placed"
	b.publish(t, "compute", "placed-1", map[string]any{
		"id": "placed-1", "kind": "compute",
		"compute": map[string]any{
			"template": map[string]string{"type": "BASIC", "name": "BASE"},
			"job": map[string]any{
				"name": "placed-1", "queue": "normal", "nodes": 1, "ppn": 4, "wall_time": "00:10:00",
				"work_dir": dir, "script": dir + "/placed.sh",
			},
			"inputs": []map[string]any{
				{"from": "s3://" + devstack.Bucket + "/scripts/placed.sh", "to": dir, "cover": true},
				{"from": "s3://" + devstack.Bucket + "/inputs/params.nml", "to": dir},
			},
			"outputs": []string{dir + "/params-copy.nml"},
		},
	})
	ev := b.await(t, "placed-1", time.Minute)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	for _, a := range ev.Data.Artifacts {
		if filepath.Base(a.Key) == "params-copy.nml" && a.Size == int64(len("placed=1\n")) {
			return
		}
	}
	t.Errorf("the placed input did not reach the job: artifacts %+v", ev.Data.Artifacts)
}

// startDev runs a worker with the embedded default (SLUICE_DEV=true) on
// dataDir, its S3 store on s3Addr and NATS on any free port, and returns
// its endpoints once it is ready.
func startDev(t *testing.T, b *bundle, dataDir, s3Addr string) worker.Endpoints {
	t.Helper()
	cfg := b.cfg
	cfg.Dev, cfg.DataDir, cfg.DevNATSPort, cfg.DevS3Addr = true, dataDir, -1, s3Addr
	cfg.NATSURL, cfg.S3Endpoint, cfg.S3Bucket, cfg.MediaBaseURL, cfg.ComputeBaseURL = "", "", "", "", ""
	cfg.DevSimComputeTime = 500 * time.Millisecond
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan worker.Endpoints, 1)
	done := make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, cfg, logging.New(b.logs, "json", "debug"), func(ep worker.Endpoints) { ready <- ep })
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case ep := <-ready:
		return ep
	case err := <-done:
		t.Fatalf("worker: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not start in 30s")
	}
	return worker.Endpoints{}
}
