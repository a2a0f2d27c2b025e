package containertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCompose is a compose command that logs every call and answers ps -q
// with one container, and fakeDocker a docker whose containers are all
// healthy: images/compose.sh runs without an engine.
const (
	fakeCompose = `#!/bin/sh
echo "$*" >>"$FAKE_LOG"
case " $* " in *" ps -q "*) echo c1 ;; esac
`
	fakeDocker = `#!/bin/sh
echo healthy
`
)

// TestComposeShUpPassesArguments: what follows `images/compose.sh up` (a
// service, flags) reaches compose up, -d is implied, and without a service
// the stack's own services start.
func TestComposeShUpPassesArguments(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"compose": fakeCompose, "docker": fakeDocker} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"up"}, "up -d --scale worker=1 simulator worker"},
		{[]string{"up", "-d", "console"}, "up -d --scale worker=1 console"},
		{[]string{"up", "--build"}, "up -d --scale worker=1 --build simulator worker"},
	}
	for _, tt := range tests {
		log := filepath.Join(dir, strings.Join(tt.args, "_")+".log")
		cmd := exec.Command("bash", append([]string{"images/compose.sh"}, tt.args...)...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "COMPOSE="+filepath.Join(dir, "compose"), "FAKE_LOG="+log,
			"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "SLUICE_STACK=single", "WORKERS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("images/compose.sh %s: %v\n%s", strings.Join(tt.args, " "), err, out)
		}
		calls, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		var up string
		for _, c := range strings.Split(string(calls), "\n") {
			if _, after, ok := strings.Cut(c, "--profile console "); ok && strings.HasPrefix(after, "up ") {
				up = after
			}
		}
		if up != tt.want {
			t.Errorf("images/compose.sh %s ran compose %q, want %q\n(calls: %s)", strings.Join(tt.args, " "), up, tt.want, calls)
		}
	}
}

// TestComposeShRunsTheBuiltTag: SLUICE_IMAGE_TAG, the tag images/build.sh
// gives the images, is the tag images/compose.sh runs, in both stacks; a
// SLUICE_<NAME>_IMAGE still names another image. compose config resolves
// the files without starting anything.
func TestComposeShRunsTheBuiltTag(t *testing.T) {
	t.Parallel()
	composeCmd := composeCommand(t)
	clusterDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(clusterDir, "certs"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"certs/ca.pem": "",
		"secrets.env":  "SLUICE_NATS_PRODUCER_PASSWORD=p\nSLUICE_NATS_WORKER_PASSWORD=w\nSLUICE_NATS_ADMIN_PASSWORD=a\n",
	} {
		if err := os.WriteFile(filepath.Join(clusterDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, stack := range []string{"single", "cluster"} {
		cmd := exec.Command("bash", "images/compose.sh", "config")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "COMPOSE="+composeCmd, "SLUICE_STACK="+stack, "SLUICE_CLUSTER_DIR="+clusterDir,
			"SLUICE_IMAGE_TAG=t1", "SLUICE_NATS_IMAGE=nats:2.12",
			"SLUICE_S3_IMAGE=", "SLUICE_SIMULATOR_IMAGE=", "SLUICE_WORKER_IMAGE=", "SLUICE_ENQUEUE_IMAGE=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: images/compose.sh config: %v\n%s", stack, err, out)
		}
		seen := map[string]bool{}
		for _, line := range strings.Split(string(out), "\n") {
			img, ok := strings.CutPrefix(strings.TrimSpace(line), "image: ")
			if !ok {
				continue
			}
			seen[img] = true
			if img != "nats:2.12" && !strings.HasSuffix(img, ":t1") {
				t.Errorf("%s stack: compose runs %s, want the tag SLUICE_IMAGE_TAG=t1", stack, img)
			}
		}
		for _, want := range []string{"nats:2.12", "sluice-worker:t1", "sluice-versitygw:t1", "sluice-simulator:t1", "sluice-enqueue:t1"} {
			if !seen[want] {
				t.Errorf("%s stack: no service runs %s (images: %v)", stack, want, seen)
			}
		}
	}
}
