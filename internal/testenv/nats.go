// Package testenv starts the real parts the test suites run against: an
// embedded NATS server with JetStream and an in-process S3-compatible
// store; and it gives them a settable clock and a sleeper that does not
// sleep. Production code never imports it.
package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	return StartNATSWith(t, NATSOptions{})
}

// NATSOptions secures the server StartNATSWith starts.
type NATSOptions struct {
	// TLS, when set, makes the server present TLS's server certificate
	// and, with MutualTLS, require a client certificate signed by TLS's
	// CA. The test's own connection uses the CA and the client
	// certificate.
	TLS       *TLSFiles
	MutualTLS bool
	// Users, when set, are the only users the server accepts; the test's
	// own connection is then User with Password (which must be one of
	// them).
	Users          []*server.User
	User, Password string
	// MaxStore bounds the server's JetStream file storage (its
	// max_store), in bytes; 0: no bound of the test's.
	MaxStore int64
}

// StartNATSWith is StartNATS with TLS and users.
func StartNATSWith(t testing.TB, o NATSOptions) *NATS {
	t.Helper()
	dir := t.TempDir()
	cfg := natsembed.Config{Port: -1, StoreDir: dir, Users: o.Users, MaxStore: o.MaxStore}
	opts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
	if o.TLS != nil {
		cfg.TLS = o.TLS.ServerConfig(t, o.MutualTLS)
		opts = append(opts, nats.Secure(o.TLS.ClientConfig(t)))
	}
	if o.User != "" {
		opts = append(opts, nats.UserInfo(o.User, o.Password))
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

// StoredMsgs returns how many messages stream holds, failing the test when
// JetStream does not say within 10s.
func StoredMsgs(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx := Context(t, 10*time.Second)
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}
