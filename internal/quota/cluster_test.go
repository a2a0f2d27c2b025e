package quota_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestLeasesHoldThroughALeaderChange runs two workers' leases on an R3
// bucket of a three-node cluster and isolates the bucket's leader while
// jobs come and go: writes whose answers are lost in the election are
// recognised or retried, never taken as granted, so no more than the limit
// hold a lease at once, every job gets one, and every lease comes back.
func TestLeasesHoldThroughALeaderChange(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	n := c.Client(t)
	ctx := testenv.Context(t, 2*time.Minute)
	if _, err := n.JS.CreateOrUpdateKeyValue(ctx, quota.BucketConfig(3)); err != nil {
		t.Fatal(err)
	}
	clock := testenv.NewClock()
	var fleets []*quota.Fleet
	for i := range 2 {
		// Each worker talks to all three nodes through its own connection.
		wc := c.Client(t)
		wkv, err := wc.JS.KeyValue(ctx, quota.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		b := newBundle(t, wc.JS, wkv, clock)
		f, _ := b.fleet(t, fmt.Sprintf("w%d", i), quota.Limits{MediaTasks: 3})
		fleets = append(fleets, f)
	}
	const jobs = 30
	run := runJobs(ctx, t, fleets, jobs)
	// Once a few jobs have had their lease, cut the bucket's leader off.
	eventually(t, "some leases granted", func() bool { return run.granted.Load() >= 5 })
	leader := streamLeader(t, c, n.JS)
	var others []int
	for i := range c.Nodes {
		if i != leader {
			others = append(others, i)
		}
	}
	// Asked through the majority: the cut-off node may still think it
	// leads.
	majority := c.Client(t, others...)
	c.Isolate(leader)
	eventually(t, "a new leader", func() bool {
		l := streamLeaderOrNone(c, majority.JS)
		return l >= 0 && l != leader
	})
	c.Rejoin(leader)
	run.wait()
	if n := run.granted.Load(); n != jobs {
		t.Fatalf("%d of %d jobs got a lease", n, jobs)
	}
	if p := run.peak.Load(); p > 3 {
		t.Fatalf("%d jobs held a lease at once, limit 3", p)
	}
	eventually(t, "every lease given back", func() bool {
		sts, err := quota.Read(ctx, n.JS, time.Time{})
		return err == nil && len(sts) == 1 && sts[0].InUse == 0
	})
}

// streamLeaderOrNone is the index of the node leading the bucket's
// stream, or -1 while none does.
func streamLeaderOrNone(c *testenv.Cluster, js jetstream.JetStream) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "KV_"+quota.Bucket)
	if err != nil {
		return -1
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return -1
	}
	for i, node := range c.Nodes {
		if node.Server.Name() == info.Cluster.Leader {
			return i
		}
	}
	return -1
}

func streamLeader(t *testing.T, c *testenv.Cluster, js jetstream.JetStream) int {
	t.Helper()
	leader := -1
	eventually(t, "the bucket's leader", func() bool { leader = streamLeaderOrNone(c, js); return leader >= 0 })
	return leader
}
