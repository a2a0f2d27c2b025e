package demo_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
)

// holdPorts listens on the fixed addresses a dev worker uses by default
// (its console and metrics — Prometheus's port —, NATS, the S3 store), as
// a local Prometheus or another dev worker would. An address already taken
// by someone else is held all the same.
func holdPorts(t *testing.T) {
	t.Helper()
	for _, addr := range []string{"127.0.0.1:9090", "127.0.0.1:4222", "127.0.0.1:7070"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("%s is already taken: %v", addr, err)
			continue
		}
		t.Cleanup(func() { l.Close() })
	}
}

// run runs the demo in the background and returns its error; only a demo
// that hangs (stuck after its own timeout) fails on the guard.
func run(t *testing.T, ctx context.Context, o demo.Options) (string, error) {
	t.Helper()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- demo.Run(ctx, &out, o) }()
	select {
	case err := <-done:
		t.Log(out.String())
		return out.String(), err
	case <-time.After(o.Timeout + time.Minute):
		t.Fatalf("the demo hung past its timeout %v", o.Timeout)
		return "", nil
	}
}

// TestDemo runs the whole demo with the dev worker's default ports held:
// it passes only when every scenario ends as expected and every artifact
// reads back with its sha256. Without a data directory the demo uses a
// temporary one and removes it at the end.
func TestDemo(t *testing.T) {
	holdPorts(t)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("SLUICE_HTTP_ADDR", "")
	os.Unsetenv("SLUICE_HTTP_ADDR")
	out, err := run(t, context.Background(), demo.Options{TaskTime: 500 * time.Millisecond, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, ":9090/") {
		t.Error("the demo's console is on the held port 9090")
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "sluice-demo-*")); len(left) > 0 {
		t.Errorf("the demo left %v behind", left)
	}
	if !strings.Contains(out, "removed at the end") {
		t.Error("the demo does not say its files are removed")
	}
	for _, want := range []string{"demo-speech-stream", "demo-compute", "demo/compute/demo-compute/result.dat",
		"demo-container", "demo/container/demo-container/model.bin",
		"demo-pipeline", "demo/compute/demo-pipeline--render/voice-used.mp3", "all 11 jobs ended as expected",
		"container instances left alive: none (1 container job(s) checked in the simulator)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestDemoReportsWorkerStartError asks for a console address that is
// taken: the demo returns the worker's start error naming the address,
// and still removes its temporary directory.
func TestDemoReportsWorkerStartError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	_, err = run(t, context.Background(), demo.Options{HTTPAddr: l.Addr().String(), Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "did not start") || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Errorf("error %v, want the worker's start error naming %s", err, l.Addr())
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "sluice-demo-*")); len(left) > 0 {
		t.Errorf("the demo left %v behind", left)
	}
}

// TestDemoHonoursSLUICE_HTTP_ADDR: with no -http the demo's console listens
// where SLUICE_HTTP_ADDR says; a taken address shows it was used.
func TestDemoHonoursSLUICE_HTTP_ADDR(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("SLUICE_HTTP_ADDR", l.Addr().String())
	_, err = run(t, context.Background(), demo.Options{Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), l.Addr().String()) {
		t.Errorf("error %v, want the start error on SLUICE_HTTP_ADDR %s", err, l.Addr())
	}
}
