// Package natsembed runs a real NATS server with JetStream inside the
// current process: the embedded default's broker and the fast path of the
// test suites.
package natsembed

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Config describes an embedded server.
type Config struct {
	// Host is the listen address. Defaults to 127.0.0.1.
	Host string
	// Port is the client port; -1 picks a free one. Defaults to 4222 (0 is
	// taken as the default, use -1 for a random port).
	Port int
	// StoreDir is where JetStream keeps its files. Required.
	StoreDir string
	// SyncAlways makes JetStream fsync every write (slower, survives power
	// loss). Defaults to false (the server's periodic sync).
	SyncAlways bool
	// TLS, when set, makes every client connect with TLS. With ClientAuth
	// tls.RequireAndVerifyClientCert the server also requires a client
	// certificate signed by a CA in ClientCAs (mutual TLS). Defaults to
	// none.
	TLS *tls.Config
	// Users, when set, are the only users allowed to connect, each with
	// its permissions. Defaults to none (no authentication).
	Users []*server.User
}

// Server is a running embedded NATS server.
type Server struct {
	srv *server.Server
}

// Start starts a server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("natsembed: StoreDir is required")
	}
	opts := &server.Options{
		ServerName: "sluice-embedded",
		Host:       cmp.Or(cfg.Host, "127.0.0.1"),
		Port:       cmp.Or(cfg.Port, 4222),
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		SyncAlways: cfg.SyncAlways,
		MaxPayload: 2 << 20,
	}
	if cfg.TLS != nil {
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, cfg.TLS, 5
		opts.TLSVerify = cfg.TLS.ClientAuth == tls.RequireAndVerifyClientCert
	}
	opts.Users = cfg.Users
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("natsembed: server on %s:%d not ready (is the port in use?)", opts.Host, opts.Port)
	}
	return &Server{srv: srv}, nil
}

// ClientURL is the nats:// URL clients connect to.
func (s *Server) ClientURL() string { return s.srv.ClientURL() }

// Shutdown stops the server and waits for it to finish.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}
