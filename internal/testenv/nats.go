// Package testenv starts the real parts the test suites run against: an
// embedded NATS server with JetStream and an in-process S3-compatible
// store; and it gives them a settable clock and a sleeper that does not
// sleep. Production code never imports it.
package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/natsembed"
)

// NATS is a running embedded server with a connection to it.
type NATS struct {
	URL    string
	Dir    string
	Server *natsembed.Server
	Conn   *nats.Conn
	JS     jetstream.JetStream
}

// StartNATS starts an embedded NATS server with JetStream on a random
// loopback port, stores its files in a temporary directory, and stops it
// when the test ends.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	return StartNATSTLS(t, nil, false)
}

// StartNATSTLS is StartNATS with TLS when files is not nil: the server
// presents files' server certificate and, with mutual, requires a client
// certificate signed by files' CA. The test's own connection uses the CA
// and the client certificate.
func StartNATSTLS(t testing.TB, files *TLSFiles, mutual bool) *NATS {
	t.Helper()
	dir := t.TempDir()
	cfg := natsembed.Config{Port: -1, StoreDir: dir}
	opts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
	if files != nil {
		cfg.TLS = files.ServerConfig(t, mutual)
		opts = append(opts, nats.Secure(files.ClientConfig(t)))
	}
	srv, err := natsembed.Start(cfg)
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	nc, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		srv.Shutdown()
		t.Fatalf("connect nats: %v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	t.Cleanup(func() {
		nc.Close()
		srv.Shutdown()
	})
	return &NATS{URL: srv.ClientURL(), Dir: dir, Server: srv, Conn: nc, JS: js}
}

// Context returns a context that ends with the test or after d.
func Context(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
