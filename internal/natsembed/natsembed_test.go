package natsembed_test

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

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

// TestSubscriptions: each connection's subscriptions, summed by its name,
// as /connz?subs=1 reports them.
func TestSubscriptions(t *testing.T) {
	t.Parallel()
	s, err := natsembed.Start(natsembed.Config{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	subscribe := func(name string, n int) {
		nc, err := nats.Connect(s.ClientURL(), nats.Name(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		for i := range n {
			if _, err := nc.SubscribeSync("a." + strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.Flush(); err != nil { // the server has read every SUB
			t.Fatal(err)
		}
	}
	subscribe("w1", 3)
	subscribe("w1", 1)
	subscribe("w2", 2)
	got, err := s.Subscriptions()
	if err != nil {
		t.Fatal(err)
	}
	if got["w1"] != 4 || got["w2"] != 2 || len(got) != 2 {
		t.Errorf("Subscriptions() = %v, want w1:4 w2:2", got)
	}
}
