package worker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/s3dev"
)

// TestREADMEComputeCommand runs the README tour's compute block against a
// worker started with SLUICE_DEV=true, with the store's and the binary's
// addresses replaced by the test's: the local script is uploaded, run on
// the simulated cluster, and the job succeeds with its echo in stdout and
// the file its --output names collected.
func TestREADMEComputeCommand(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, m := range shBlock.FindAllStringSubmatch(string(doc), -1) {
		if strings.Contains(m[1], "enqueue compute") {
			block = m[1]
		}
	}
	if block == "" {
		t.Fatal("README.md has no sh block with an enqueue compute command")
	}
	const readmeStore = "http://" + s3dev.DefaultAddr
	if !strings.Contains(block, readmeStore) || !strings.Contains(block, "./bin/enqueue ") {
		t.Fatalf("the README's compute block names neither %s nor ./bin/enqueue:\n%s", readmeStore, block)
	}
	b := setup(t, setupOpts{})
	addr := freeAddr(t)
	ep := startDev(t, b, t.TempDir(), addr)
	block = strings.ReplaceAll(block, readmeStore, ep.S3Endpoint)
	block = strings.ReplaceAll(block, "./bin/enqueue ", enqueueBin+" ")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "SLUICE_NATS_URL="+ep.NATSURL)
	out, err := cmd.CombinedOutput()
	t.Logf("%s\n%s", block, out)
	if err != nil {
		t.Fatalf("the README's compute block failed: %v", err)
	}
	b.useNATS(t, ep.NATSURL)
	ev := b.await(t, "hello-0001", time.Minute)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("hello-0001 ended %s (%+v)", ev.Data.Status, ev.Data.Error)
	}
	if !strings.Contains(block, "--output ") {
		t.Error("the README's compute block shows no --output")
	}
	echoed, output := false, false
	for _, a := range ev.Data.Artifacts {
		body, err := os.ReadFile(filepath.Join(ep.S3Dir, ep.S3Bucket, filepath.FromSlash(a.Key)))
		echoed = echoed || (err == nil && strings.Contains(string(body), "hello from the cluster"))
		output = output || (err == nil && strings.HasSuffix(a.Key, "/result.nc"))
	}
	if !echoed || !output {
		t.Errorf("hello-0001's artifacts: the script's echo %v, result.nc %v; want both: %+v", echoed, output, ev.Data.Artifacts)
	}
}
