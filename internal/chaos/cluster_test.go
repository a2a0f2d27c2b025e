package chaos_test

// The cluster fault suite: the chaos scenario's jobs and invariants on a
// three-node JetStream cluster (R3 streams and bucket) whose leaders are
// killed, restarted and stepped down while jobs keep arriving. `make
// cluster` runs the long variant (SLUICE_CLUSTER_LONG=1). The figures
// (jobs, faults, time to a new leader and to the next finished job after
// each fault) are logged; nothing passes or fails on a timing.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/chaos"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// clusterLong reports whether the long variant runs.
func clusterLong() bool { return os.Getenv("SLUICE_CLUSTER_LONG") == "1" }

// The leaders the suite goes after: the job stream, the event stream, the
// state bucket's stream and the meta group ("").
var clusterTargets = []string{contract.JobsStream, "KV_" + contract.StateBucket, contract.EventsStream, ""}

func targetName(stream string) string {
	if stream == "" {
		return "meta"
	}
	return stream
}

// killLeader kills the leader of stream (the meta leader for ""), waits
// for another node to lead, keeps the node down for down, restarts it on
// its store directory and returns once every stream has every replica
// caught up again. It logs the time to the new leader.
func killLeader(t *testing.T, c *testenv.Cluster, stream string, down time.Duration, round int) chaos.Fault {
	name := faultName("kill", stream, round)
	return chaos.Fault{Name: name, Run: func(ctx context.Context) error {
		leader := leaderOf(c, stream)
		old, err := awaitLeader(leader, -1)
		if err != nil {
			return err
		}
		began := time.Now()
		c.KillNode(old)
		_, err = awaitLeader(leader, old)
		t.Logf("figure: %s: new leader after %s", name, time.Since(began).Round(time.Millisecond))
		time.Sleep(down)
		c.RestartNode(t, old)
		if err != nil {
			return err
		}
		return awaitCurrent(c)
	}}
}

// stepDown asks the leader of stream (the meta leader for "") to step
// down and logs the time to the new leader.
func stepDown(t *testing.T, c *testenv.Cluster, stream string, round int) chaos.Fault {
	name := faultName("step down", stream, round)
	return chaos.Fault{Name: name, Run: func(ctx context.Context) error {
		leader, step := leaderOf(c, stream), c.StepDownMeta
		if stream != "" {
			step = func() (int, error) { return c.StepDownStream(stream) }
		}
		if _, err := awaitLeader(leader, -1); err != nil {
			return err
		}
		began := time.Now()
		old, err := step()
		if err != nil {
			return err
		}
		_, err = awaitLeader(leader, old)
		t.Logf("figure: %s: new leader after %s", name, time.Since(began).Round(time.Millisecond))
		return err
	}}
}

func faultName(what, stream string, round int) string {
	name := what + " " + targetName(stream) + " leader"
	if round > 0 {
		name += fmt.Sprintf(" (round %d)", round+1)
	}
	return name
}

func leaderOf(c *testenv.Cluster, stream string) func() int {
	if stream == "" {
		return c.MetaLeader
	}
	return func() int { return c.StreamLeader(stream) }
}

// awaitLeader waits for leader to name a node other than not.
func awaitLeader(leader func() int, not int) (int, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		if l := leader(); l >= 0 && l != not {
			return l, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("no new leader within a minute (was n%d)", not+1)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitCurrent waits until every stream of the contract has a leader and
// every replica caught up, so that the next fault never takes a quorum.
func awaitCurrent(c *testenv.Cluster) error {
	deadline := time.Now().Add(2 * time.Minute)
	for _, s := range clusterTargets[:3] {
		for !c.StreamCurrent(s) {
			if time.Now().After(deadline) {
				return fmt.Errorf("stream %s not caught up within 2 minutes", s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// TestClusterFaults runs worker processes on a three-node R3 cluster
// while the leaders of SLUICE_JOBS, KV_SLUICE_STATE and SLUICE_EVENTS and
// the meta leader are killed and restarted, then stepped down, and checks
// the chaos run's promises: none lost, one terminal event each, artifacts
// as made, second submissions only where the record explains them.
func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("the cluster fault suite runs a three-node cluster and worker processes; skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	bin, err := chaos.BuildWorker(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := testenv.StartCluster(t, 3)

	jobs, rate, rounds, spacing, down, kills := 100, 4.0, 1, 2500*time.Millisecond, time.Second, time.Duration(-1)
	if clusterLong() {
		jobs, rate, rounds, spacing, down, kills = 600, 5, 3, 5*time.Second, 3*time.Second, 10*time.Second
	}
	var faults []chaos.Fault
	for round := range rounds {
		for _, s := range clusterTargets {
			faults = append(faults, killLeader(t, c, s, down, round))
		}
		for _, s := range clusterTargets {
			faults = append(faults, stepDown(t, c, s, round))
		}
	}
	for i := range faults {
		faults[i].At = 2*time.Second + time.Duration(i)*spacing
	}
	// The run's files (worker logs, the store) stay for a look when the
	// run fails.
	dir, err := os.MkdirTemp("", "sluice-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the run's files are kept in %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	publishing := time.Duration(float64(jobs) / rate * float64(time.Second))
	rep, err := chaos.Run(ctx, chaos.Config{
		Dir: dir, WorkerBin: bin, Jobs: jobs, PublishRate: rate, Workers: 3,
		NATSURL: c.URLs(), Replicas: 3, Faults: faults,
		// Binding: the load alone would keep about 12 media tasks upstream.
		FleetMediaTasks: 8,
		KillEvery:       kills, S3OutageAt: -1,
		Seed: uint64(time.Now().UnixNano()),
		// Stuck means "not finished in the faults' time + 4 minutes", not
		// a timing.
		Deadline: max(publishing, time.Duration(len(faults))*spacing) + 4*time.Minute,
		Progress: &lineLogger{t: t},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
	if rep.Lost != 0 || rep.Stuck != 0 || rep.MultiTerminal != 0 || rep.BadArtifacts != 0 || rep.Unexplained != 0 || rep.Leaks != 0 {
		t.Errorf("broken promises: %s", rep)
	}
	if rep.Succeeded+rep.Failed != rep.Jobs {
		t.Errorf("%d succeeded + %d failed of %d jobs", rep.Succeeded, rep.Failed, rep.Jobs)
	}
	if t.Failed() {
		logWorkerTails(t, filepath.Join(dir, "logs"))
		logJobLines(t, filepath.Join(dir, "logs"), rep.StuckIDs)
		logJobsState(t, c)
	}
	for _, rec := range rep.Recoveries {
		t.Logf("figure: %s", rec)
	}
	t.Logf("figure: %s", rep)
}

// logJobsState logs what SLUICE_JOBS and its consumers hold at the end of
// a failed run: a stuck job is either still a message there (and the
// consumer's counts say whether it waits for an ack or a delivery) or gone.
func logJobsState(t *testing.T, c *testenv.Cluster) {
	cl := c.Client(t)
	ctx := testenv.Context(t, 30*time.Second)
	s, err := cl.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Logf("%s: %v", contract.JobsStream, err)
		return
	}
	t.Logf("%s: %d messages, sequences %d-%d, leader %s", contract.JobsStream, s.CachedInfo().State.Msgs,
		s.CachedInfo().State.FirstSeq, s.CachedInfo().State.LastSeq, s.CachedInfo().Cluster.Leader)
	for _, kind := range contract.Kinds {
		cn, err := cl.JS.Consumer(ctx, contract.JobsStream, contract.ConsumerName(kind))
		if err != nil {
			t.Logf("consumer %s: %v", kind, err)
			continue
		}
		i := cn.CachedInfo()
		t.Logf("consumer %s: delivered %d, ack floor %d, ack pending %d, redelivered %d, pending %d, waiting %d, leader %s",
			kind, i.Delivered.Stream, i.AckFloor.Stream, i.NumAckPending, i.NumRedelivered, i.NumPending, i.NumWaiting, i.Cluster.Leader)
	}
	// Every replica's own view: a replica whose store lacks a message's
	// pending ack would never redeliver it once it leads; a quota replica
	// behind the others answers its workers' reads with an old board.
	for i, n := range c.Nodes {
		if c.Down(i) {
			continue
		}
		for _, stream := range []string{contract.JobsStream, "KV_" + quota.Bucket} {
			for _, line := range n.Server.ReplicaReport(stream) {
				t.Logf("replica %s", line)
			}
		}
	}
	// The fleet's quota board: a job waiting for a lease waits on it.
	if kv, err := cl.JS.KeyValue(ctx, quota.Bucket); err == nil {
		for _, res := range quota.Resources {
			if e, err := kv.Get(ctx, "leases."+res); err == nil {
				t.Logf("%s leases.%s (revision %d): %s", quota.Bucket, res, e.Revision(), e.Value())
			}
		}
	}
	// The messages still in the stream: a stuck job whose message is here
	// waits for its consumer; one whose message is gone was removed.
	info := s.CachedInfo().State
	for seq, listed := info.FirstSeq, 0; seq <= info.LastSeq && listed < 50; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		listed++
		t.Logf("%s message %d: %s job %s, stored %s", contract.JobsStream, seq, m.Subject,
			m.Header.Get(contract.HeaderMsgID), m.Time.Format(time.TimeOnly))
	}
}
