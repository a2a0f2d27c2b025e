package testenv

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/natsembed"
)

// PullPattern is the subject prefix of JetStream pull requests: counted by
// every node's client proxy, it tells how many pulls clients sent.
const PullPattern = "$JS.API.CONSUMER.MSG.NEXT."

// Cluster is a JetStream cluster of in-process nats-servers on loopback
// whose network the test controls: every route between two nodes runs
// through a proxy of its own (one per direction), and clients reach each
// node through a proxy of its own, so a test can isolate a node from the
// others, cut a node off from its clients, and count the pull requests a
// node receives.
type Cluster struct {
	Nodes []*ClusterNode
	// links[i][j] carries the routes node i dials to node j.
	links [][]*Proxy
}

// ClusterNode is one server of a Cluster.
type ClusterNode struct {
	// Server is the running server; KillNode and RestartNode replace it
	// (call them and read Server from one goroutine).
	Server *natsembed.Server
	// Clients is the proxy clients reach the node through; its Count is
	// the pull requests (PullPattern) sent to this node.
	Clients *Proxy
	// cfg starts the node again on its store directory (RestartNode).
	cfg  natsembed.Config
	down bool
}

// URL is the nats:// URL of the node through its client proxy.
func (n *ClusterNode) URL() string { return "nats://" + n.Clients.Addr() }

// StartCluster starts an n-node JetStream cluster (n >= 3 for R3 streams)
// on loopback and waits until it has a meta leader. Nodes advertise no
// client URLs, so a client knows only the nodes it is given, and no route
// address, so routes only run through the proxies. The cluster stops when
// the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := &Cluster{links: make([][]*Proxy, n)}
	for i := range n {
		c.links[i] = make([]*Proxy, n)
		for j := range n {
			if i != j {
				c.links[i][j] = StartProxy(t, "", "")
			}
		}
	}
	nowhere := unusedAddr(t)
	for i := range n {
		var routes []string
		for j := range n {
			if i != j {
				routes = append(routes, "nats-route://"+c.links[i][j].Addr())
			}
		}
		cfg := natsembed.Config{
			Name: fmt.Sprintf("n%d", i+1), Port: -1, StoreDir: filepath.Join(t.TempDir(), "nats"),
			Cluster: &natsembed.Cluster{
				Name: "sluice-test", Port: -1, Routes: routes, Advertise: nowhere, NoClientAdvertise: true,
				SystemUser: SystemUser, SystemPassword: SystemPassword,
			},
		}
		srv, err := natsembed.Start(cfg)
		if err != nil {
			t.Fatalf("start cluster node %d: %v", i+1, err)
		}
		for j := range n {
			if j != i {
				c.links[j][i].SetTarget(srv.ClusterAddr())
			}
		}
		clients := StartProxy(t, strings.TrimPrefix(srv.ClientURL(), "nats://"), PullPattern)
		node := &ClusterNode{Server: srv, Clients: clients, cfg: cfg}
		t.Cleanup(func() { node.Server.Shutdown() })
		c.Nodes = append(c.Nodes, node)
	}
	nc := c.Connect(t)
	if err := c.awaitMeta(nc); err != nil {
		t.Fatalf("cluster: %v", err)
	}
	return c
}

// unusedAddr returns a loopback address nothing listens on.
func unusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// awaitMeta waits until the cluster answers a JetStream account request.
func (c *Cluster) awaitMeta(nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no JetStream meta leader after 60s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// URLs is the comma-separated client URLs of the given nodes (0-based),
// or of every node when none is given.
func (c *Cluster) URLs(nodes ...int) string {
	if len(nodes) == 0 {
		for i := range c.Nodes {
			nodes = append(nodes, i)
		}
	}
	urls := make([]string, len(nodes))
	for k, i := range nodes {
		urls[k] = c.Nodes[i].URL()
	}
	return strings.Join(urls, ",")
}

// Connect returns a connection to the given nodes (every node when none
// is given) that reconnects for ever; it is closed when the test ends.
func (c *Cluster) Connect(t testing.TB, nodes ...int) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.URLs(nodes...), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Client is Connect with a JetStream context, in the shape the single
// server's suites use (Server and Dir are unset).
func (c *Cluster) Client(t testing.TB, nodes ...int) *NATS {
	t.Helper()
	nc := c.Connect(t, nodes...)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return &NATS{URL: c.URLs(nodes...), Conn: nc, JS: js}
}

// Isolate cuts every route of node i (0-based): it and the rest of the
// cluster no longer hear each other. Its clients stay connected to it.
func (c *Cluster) Isolate(i int) { c.routes(i, (*Proxy).Cut) }

// Rejoin heals the routes of node i.
func (c *Cluster) Rejoin(i int) { c.routes(i, (*Proxy).Heal) }

func (c *Cluster) routes(i int, f func(*Proxy)) {
	for j := range c.Nodes {
		if j != i {
			f(c.links[i][j])
			f(c.links[j][i])
		}
	}
}

// Pulls is the pull requests sent to every node so far.
func (c *Cluster) Pulls() int64 {
	var n int64
	for _, node := range c.Nodes {
		n += node.Clients.Count()
	}
	return n
}
