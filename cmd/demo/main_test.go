package main

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoStopsOnSIGTERMAtStart builds the demo, starts it with
// Prometheus's port 9090 (the dev console's default) held, and sends SIGTERM as soon as it says it starts: it
// must exit non-zero, say it was interrupted and leave no temporary
// directory behind.
func TestDemoStopsOnSIGTERMAtStart(t *testing.T) {
	if l, err := net.Listen("tcp", "127.0.0.1:9090"); err == nil {
		defer l.Close()
	}
	bin := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	tmp := t.TempDir()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "SLUICE_DEMO_DIR=", "DEMO_HTTP=")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && !strings.Contains(sc.Text(), "starting the embedded default") {
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err = <-exited:
	case <-time.After(2 * time.Minute):
		// Only a hang gets here: a stopped demo exits in a second.
		cmd.Process.Kill()
		t.Fatalf("the demo did not stop on SIGTERM; stderr:\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want exit status 1", err)
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say the demo was interrupted:\n%s", stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "sluice-demo-*")); len(left) > 0 {
		t.Errorf("the demo left %v behind", left)
	}
}
