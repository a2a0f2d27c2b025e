package worker_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/worker"
)

// waitFor waits until cond holds, failing the test after limit; what is
// waited for is an event (a log line), the limit only ends a hung test.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A stop while the worker still waits for NATS (SIGTERM during start) is a
// clean stop: Run returns nil, so the binary exits 0 without "worker
// failed". Each attempt's log line names the server without credentials.
func TestStopWhileConnectingIsClean(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "nats://" + ln.Addr().String()
	_ = ln.Close()
	cfg := b.cfg
	cfg.NATSURL = "nats://someone:conn-pw-7f1@" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx, cfg, logging.New(b.logs, "json", "debug"), nil) }()
	waitFor(t, 20*time.Second, "connection attempt", func() bool { return strings.Contains(b.logs.String(), "cannot connect to NATS") })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil after a stop while connecting", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not stop")
	}
	if !strings.Contains(b.logs.String(), "worker stopped before it consumed") {
		t.Error("no log line says the worker stopped while starting")
	}
	// The attempts name the server, never its password.
	if !strings.Contains(b.logs.String(), `"url":"`+closed+`"`) || strings.Contains(b.logs.String(), "conn-pw-7f1") {
		t.Errorf("the connection attempts do not name %s without its credentials:\n%s", closed, b.logs.String())
	}
}

// /metrics names the running build.
func TestMetricsNameTheBuild(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan worker.Endpoints, 1)
	go func() {
		done <- worker.Run(ctx, b.cfg, logging.New(b.logs, "json", "debug"), func(ep worker.Endpoints) { ready <- ep })
	}()
	defer func() { cancel(); <-done }()
	var ep worker.Endpoints
	select {
	case ep = <-ready:
	case err := <-done:
		t.Fatalf("worker: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not start")
	}
	resp, err := http.Get("http://" + ep.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	in := buildinfo.Read()
	var line string
	for l := range strings.Lines(string(body)) {
		if strings.HasPrefix(l, "sluice_build_info{") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, `commit="`+in.Commit+`"`) || !strings.Contains(line, `go_version="`+in.GoVersion+`"`) || !strings.HasSuffix(strings.TrimSpace(line), " 1") {
		t.Errorf("sluice_build_info line = %q (build %+v)", line, in)
	}
}
