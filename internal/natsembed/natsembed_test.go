package natsembed_test

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/natsembed"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestRestartOnTheSamePort: a server started again on its port and store
// right after a shutdown (a dev worker restarted at once) starts.
func TestRestartOnTheSamePort(t *testing.T) {
	t.Parallel()
	cfg := natsembed.Config{StoreDir: t.TempDir(), Port: freePort(t)}
	for i := range 3 {
		s, err := natsembed.Start(cfg)
		if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		s.Shutdown()
	}
}

// TestPortInUseSaysSo: a port another process listens on is an immediate
// error that says so, not a wait for readiness.
func TestPortInUseSaysSo(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = natsembed.Start(natsembed.Config{StoreDir: t.TempDir(), Port: port})
	if err == nil || !strings.Contains(err.Error(), "cannot listen on 127.0.0.1:"+strconv.Itoa(port)) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("Start on a port in use: %v", err)
	}
}
