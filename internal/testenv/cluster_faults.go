package testenv

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/natsembed"
)

// The system account's user on every node of a Cluster: only it may ask
// the meta leader to step down. Clients without credentials are in the
// global account, as on a server without users.
const (
	SystemUser     = "sys"
	SystemPassword = "sys-test-only"
)

// KillNode stops node i (0-based) abruptly: its routes and client links
// are cut first, so the other nodes and the clients see it vanish as
// after a crash (nats-server's own shutdown would hand its leaderships
// over first), then the server stops. Its store directory stays for
// RestartNode.
func (c *Cluster) KillNode(i int) {
	n := c.Nodes[i]
	if n.down {
		return
	}
	c.Isolate(i)
	n.Clients.Cut()
	n.Server.Shutdown()
	n.down = true
}

// RestartNode starts node i again on its store directory, with its name,
// and points the proxies at it, so its routes and its clients' addresses
// are what they were: it rejoins the cluster and catches up.
func (c *Cluster) RestartNode(t testing.TB, i int) {
	t.Helper()
	n := c.Nodes[i]
	if !n.down {
		return
	}
	var srv *natsembed.Server
	var err error
	for range 5 {
		if srv, err = natsembed.Start(n.cfg); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restart cluster node %d: %v", i+1, err)
	}
	n.Server, n.down = srv, false
	for j := range c.Nodes {
		if j != i {
			c.links[j][i].SetTarget(srv.ClusterAddr())
		}
	}
	n.Clients.SetTarget(strings.TrimPrefix(srv.ClientURL(), "nats://"))
	c.Rejoin(i)
	n.Clients.Heal()
}

// Down reports whether node i was killed and not restarted.
func (c *Cluster) Down(i int) bool { return c.Nodes[i].down }

// StreamLeader is the node (0-based) that leads stream, or -1 while none
// does (an election, or no quorum). A KV bucket's stream is KV_<bucket>.
func (c *Cluster) StreamLeader(stream string) int {
	return c.leader(func(s *natsembed.Server) bool { return s.IsStreamLeader(stream) })
}

// ConsumerLeader is the node (0-based) that leads consumer of stream, or
// -1 while none does.
func (c *Cluster) ConsumerLeader(stream, consumer string) int {
	return c.leader(func(s *natsembed.Server) bool { return s.IsConsumerLeader(stream, consumer) })
}

// MetaLeader is the node (0-based) that is the JetStream meta leader, or
// -1 while none is.
func (c *Cluster) MetaLeader() int {
	return c.leader((*natsembed.Server).IsMetaLeader)
}

func (c *Cluster) leader(is func(*natsembed.Server) bool) int {
	for i, n := range c.Nodes {
		if !n.down && is(n.Server) {
			return i
		}
	}
	return -1
}

// StreamCurrent reports whether every running replica of stream is caught
// up with its leader (and there is one).
func (c *Cluster) StreamCurrent(stream string) bool {
	if c.StreamLeader(stream) < 0 {
		return false
	}
	for _, n := range c.Nodes {
		if !n.down && !n.Server.IsStreamCurrent(stream) {
			return false
		}
	}
	return true
}

// AwaitStreamLeader waits up to within for stream to have a leader and
// returns it.
func (c *Cluster) AwaitStreamLeader(stream string, within time.Duration) (int, error) {
	return c.await(within, func() int { return c.StreamLeader(stream) }, "stream "+stream)
}

// AwaitMetaLeader waits up to within for a meta leader and returns it.
func (c *Cluster) AwaitMetaLeader(within time.Duration) (int, error) {
	return c.await(within, c.MetaLeader, "meta group")
}

func (c *Cluster) await(within time.Duration, leader func() int, what string) (int, error) {
	deadline := time.Now().Add(within)
	for {
		if l := leader(); l >= 0 {
			return l, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("%s has no leader after %s", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StepDownStream asks the leader of stream to hand its leadership to
// another replica; it returns the node that led.
func (c *Cluster) StepDownStream(stream string) (int, error) {
	l := c.StreamLeader(stream)
	if l < 0 {
		return -1, fmt.Errorf("stream %s has no leader to step down", stream)
	}
	return l, c.Nodes[l].Server.StepDownStream(stream)
}

// StepDownMeta asks the meta leader to hand its leadership to another
// node, as the system account's user; it returns the node that led.
func (c *Cluster) StepDownMeta() (int, error) {
	l := c.MetaLeader()
	if l < 0 {
		return -1, fmt.Errorf("no meta leader to step down")
	}
	nc, err := nats.Connect(c.URLs(), nats.UserInfo(SystemUser, SystemPassword))
	if err != nil {
		return l, fmt.Errorf("connect as the system user: %w", err)
	}
	defer nc.Close()
	var m *nats.Msg
	for attempt := 0; ; attempt++ {
		if m, err = nc.Request("$JS.API.META.LEADER.STEPDOWN", nil, 5*time.Second); err == nil {
			break
		}
		// The answer may be lost in the very leader change it asked for:
		// the step-down happened if another node leads now. A request
		// that reached no leader (one just restarted and still catching
		// up) is sent again.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if now := c.MetaLeader(); now >= 0 && now != l {
				return l, nil
			}
		}
		if attempt == 3 {
			return l, fmt.Errorf("meta step-down: %w", err)
		}
	}
	var resp struct {
		Success bool `json:"success"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return l, fmt.Errorf("meta step-down answer %q: %w", m.Data, err)
	}
	if !resp.Success {
		desc := string(m.Data)
		if resp.Error != nil {
			desc = resp.Error.Description
		}
		return l, fmt.Errorf("meta step-down refused: %s", desc)
	}
	return l, nil
}
