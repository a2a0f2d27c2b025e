// Package natsembed runs a real NATS server with JetStream inside the
// current process: the embedded default's broker, the fast path of the
// test suites and, with Cluster set, one node of a JetStream cluster.
package natsembed

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
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
	// Name is the server's name. Defaults to sluice-embedded; every node of
	// a cluster needs its own.
	Name string
	// Cluster, when set, makes the server a node of a JetStream cluster.
	Cluster *Cluster
	// MaxStore bounds the file storage of JetStream on this server, in
	// bytes (its max_store): past it, writes are refused for lack of
	// space. Defaults to 0 (the server's own bound, from the disk).
	MaxStore int64
}

// Cluster is a node's part in a JetStream cluster.
type Cluster struct {
	// Name is the cluster's name, the same on every node. Required.
	Name string
	// Port is the route listen port on Host; -1 picks a free one.
	Port int
	// Routes are the nats-route://host:port URLs of the other nodes.
	Routes []string
	// Advertise is the route address told to other nodes ("" tells the
	// listen address). A test that puts proxies between nodes advertises
	// an address that leads nowhere, so no node dials another past them.
	Advertise string
	// NoClientAdvertise keeps the cluster's client URLs from clients: a
	// client then knows only the servers it was given.
	NoClientAdvertise bool
	// SystemUser and SystemPassword, when set, add a user of the system
	// account (SYS), which may send the cluster's system requests (a meta
	// leader step-down); every other client then connects without
	// credentials as before, into the global account. Defaults to none.
	SystemUser, SystemPassword string
}

// anonymousUser is the user of a client without credentials on a cluster
// node with a system user (Cluster.SystemUser).
const anonymousUser = "sluice-anonymous"

// readyWait bounds how long Start waits for the server to accept
// connections (JetStream recovers its store first).
const readyWait = 10 * time.Second

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
		ServerName:        cmp.Or(cfg.Name, "sluice-embedded"),
		Host:              cmp.Or(cfg.Host, "127.0.0.1"),
		Port:              cmp.Or(cfg.Port, 4222),
		JetStream:         true,
		StoreDir:          cfg.StoreDir,
		JetStreamMaxStore: cfg.MaxStore,
		NoSigs:            true,
		NoLog:             true,
		SyncAlways:        cfg.SyncAlways,
		MaxPayload:        2 << 20,
	}
	if cfg.TLS != nil {
		opts.TLS, opts.TLSConfig, opts.TLSTimeout = true, cfg.TLS, 5
		opts.TLSVerify = cfg.TLS.ClientAuth == tls.RequireAndVerifyClientCert
	}
	opts.Users = cfg.Users
	if c := cfg.Cluster; c != nil {
		if c.Name == "" {
			return nil, fmt.Errorf("natsembed: Cluster.Name is required")
		}
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: opts.Host, Port: c.Port, Advertise: c.Advertise, NoAdvertise: c.NoClientAdvertise}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("natsembed: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
		if c.SystemUser != "" {
			if len(opts.Users) > 0 {
				return nil, fmt.Errorf("natsembed: Cluster.SystemUser cannot be combined with Users")
			}
			sys := server.NewAccount("SYS")
			opts.Accounts, opts.SystemAccount = []*server.Account{sys}, sys.Name
			opts.Users = []*server.User{
				{Username: c.SystemUser, Password: c.SystemPassword, Account: sys},
				{Username: anonymousUser},
			}
			opts.NoAuthUser = anonymousUser
		}
	}
	// The server reports a port it cannot listen on only by never
	// becoming ready: find out first, and say so at once.
	if opts.Port > 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
		if err != nil {
			return nil, fmt.Errorf("natsembed: cannot listen on %s:%d, is another process (a worker still stopping?) using it: %w", opts.Host, opts.Port, err)
		}
		_ = ln.Close()
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyWait) {
		srv.Shutdown()
		return nil, fmt.Errorf("natsembed: server on %s:%d not ready within %s (JetStream still recovering its store in %s, or the port taken meanwhile)", opts.Host, opts.Port, readyWait, cfg.StoreDir)
	}
	return &Server{srv: srv}, nil
}

// ClientURL is the nats:// URL clients connect to.
func (s *Server) ClientURL() string { return s.srv.ClientURL() }

// ClusterAddr is the host:port the server listens on for routes ("" when
// it is not a cluster node).
func (s *Server) ClusterAddr() string {
	if a := s.srv.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Name is the server's name.
func (s *Server) Name() string { return s.srv.Name() }

// Shutdown stops the server and waits for it to finish.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}

// IsMetaLeader reports whether the server is the JetStream meta leader of
// its cluster.
func (s *Server) IsMetaLeader() bool { return s.srv.JetStreamIsLeader() }

// IsStreamLeader reports whether the server leads stream (of the global
// account, where every sluice client is).
func (s *Server) IsStreamLeader(stream string) bool {
	return s.srv.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream)
}

// IsStreamCurrent reports whether the server's replica of stream is
// caught up with its leader.
func (s *Server) IsStreamCurrent(stream string) bool {
	return s.srv.JetStreamIsStreamCurrent(server.DEFAULT_GLOBAL_ACCOUNT, stream)
}

// StepDownStream asks the server, the leader of stream, to hand the
// leadership to another replica.
func (s *Server) StepDownStream(stream string) error {
	return s.srv.JetStreamStepdownStream(server.DEFAULT_GLOBAL_ACCOUNT, stream)
}

// ReplicaReport describes this server's replica of stream and of its
// consumers in one line each: the stream's messages and sequences, and
// each consumer's delivered and ack-floor sequences and pending acks as
// this replica's store holds them (the leader's pending acks are its
// working set). It is for a failed test's log.
func (s *Server) ReplicaReport(stream string) []string {
	info, err := s.srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true, Consumer: true})
	if err != nil {
		return []string{fmt.Sprintf("%s: jsz: %v", s.Name(), err)}
	}
	var out []string
	for _, acc := range info.AccountDetails {
		for _, sd := range acc.Streams {
			if sd.Name != stream {
				continue
			}
			out = append(out, fmt.Sprintf("%s: stream %s: %d messages, sequences %d-%d, leader %v",
				s.Name(), sd.Name, sd.State.Msgs, sd.State.FirstSeq, sd.State.LastSeq, sd.Cluster != nil && sd.Cluster.Leader == s.Name()))
			for _, ci := range sd.Consumer {
				out = append(out, fmt.Sprintf("%s: consumer %s: delivered %d/%d, ack floor %d/%d, ack pending %d, redelivered %d, pending %d, leader %v",
					s.Name(), ci.Name, ci.Delivered.Consumer, ci.Delivered.Stream, ci.AckFloor.Consumer, ci.AckFloor.Stream,
					ci.NumAckPending, ci.NumRedelivered, ci.NumPending, ci.Cluster != nil && ci.Cluster.Leader == s.Name()))
			}
		}
	}
	return out
}

// IsConsumerLeader reports whether the server leads consumer of stream
// (of the global account).
func (s *Server) IsConsumerLeader(stream, consumer string) bool {
	return s.srv.JetStreamIsConsumerLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream, consumer)
}

// Subscriptions is the number of subscriptions of each client connection,
// summed by connection name: what the monitoring endpoint's
// /connz?subs=1 reports, read in-process.
func (s *Server) Subscriptions() (map[string]int, error) {
	out := map[string]int{}
	for offset := 0; ; {
		cz, err := s.srv.Connz(&server.ConnzOptions{Offset: offset, Limit: 1024})
		if err != nil {
			return nil, err
		}
		for _, c := range cz.Conns {
			out[c.Name] += int(c.NumSubs)
		}
		offset += len(cz.Conns)
		if len(cz.Conns) == 0 || offset >= cz.Total {
			return out, nil
		}
	}
}
