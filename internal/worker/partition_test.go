package worker_test

// The partition suite: workers on a three-node JetStream cluster (R3) whose
// routes and client connections run through proxies the test cuts. Each
// test logs its figures (pulls per second while cut off, time to move,
// time to recover after a heal); `make partition` runs the long variant
// (SLUICE_PARTITION_LONG=1: 20 s isolations, the default 10 s bound) whose
// figures the README's Guarantees report. Nothing here passes or fails on a
// timing: bounds are on counts, waits are generous.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// long reports whether the long variant runs.
func long() bool { return os.Getenv("SLUICE_PARTITION_LONG") == "1" }

// isolation is how long the fixed-length isolations last.
func isolation() time.Duration {
	if long() {
		return 20 * time.Second
	}
	return 8 * time.Second
}

// clusterBundle starts a three-node cluster and a bundle whose own client
// reaches nodes 1 and 2 (never the one the tests isolate, node 0), and
// creates the contract's R3 objects unless bare.
func clusterBundle(t *testing.T, bare bool) (*testenv.Cluster, *bundle) {
	t.Helper()
	if testing.Short() {
		t.Skip("the partition suite runs a three-node cluster; skipped with -short")
	}
	c := testenv.StartCluster(t, 3)
	b := setup(t, setupOpts{cluster: c, clientNodes: []int{1, 2}})
	if !bare {
		ctx := testenv.Context(t, 60*time.Second)
		if err := contract.Ensure(ctx, b.nats.JS, contract.Options{Replicas: 3, AckWait: b.cfg.AckWait}); err != nil {
			t.Fatalf("ensure: %v", err)
		}
	}
	return c, b
}

// consumerLeadersOff steps the consumers' leaders down until none is on
// node, so that a worker on node sees "no responders" once node is cut.
func consumerLeadersOff(t *testing.T, b *bundle, node string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for _, kind := range contract.Kinds {
		name := contract.ConsumerName(kind)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			cn, err := b.nats.JS.Consumer(ctx, contract.JobsStream, name)
			var info *jetstream.ConsumerInfo
			if err == nil {
				info, err = cn.Info(ctx)
			}
			cancel()
			if err == nil && info.Cluster != nil && info.Cluster.Leader != "" && info.Cluster.Leader != node {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumer %s: leader still on %s (%v)", name, node, err)
			}
			if err == nil && info.Cluster != nil && info.Cluster.Leader == node {
				_, _ = b.nats.Conn.Request("$JS.API.CONSUMER.LEADER.STEPDOWN."+contract.JobsStream+"."+name, nil, 5*time.Second)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// publishRetry publishes one video job, retrying while the cluster elects
// (the job id deduplicates a publish whose answer was lost).
func publishRetry(t *testing.T, b *bundle, id string) {
	t.Helper()
	data := []byte(fmt.Sprintf(`{"id":%q,"kind":"video","video":{"model":"video-model","input":{"prompt":"partition %s"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`, id, id))
	deadline := time.Now().Add(90 * time.Second)
	for {
		m := nats.NewMsg(contract.JobSubject("video"))
		m.Data = data
		m.Header.Set(contract.HeaderMsgID, id)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := b.nats.JS.PublishMsg(ctx, m)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish %s: %v", id, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// awaitFinished waits until every job's record is terminal and returns
// the statuses; reads that fail while the cluster elects are retried.
func awaitFinished(t *testing.T, b *bundle, ids []string, within time.Duration) map[string]state.Status {
	t.Helper()
	out := make(map[string]state.Status)
	deadline := time.Now().Add(within)
	for len(out) < len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs finished within %s: %v", len(out), len(ids), within, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		if kv, err := b.nats.JS.KeyValue(ctx, contract.StateBucket); err == nil {
			st := state.NewStore(kv, "", nil)
			for _, id := range ids {
				if _, ok := out[id]; ok {
					continue
				}
				if rec, _, err := st.Get(ctx, id); err == nil && rec.Status.Terminal() {
					out[id] = rec.Status
				}
			}
		}
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	return out
}

// logLines counts the worker log lines that contain every one of parts.
func logLines(b *bundle, parts ...string) int {
	n := 0
	for line := range strings.SplitSeq(b.logs.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

// awaitLog waits until a log line contains every one of parts.
func awaitLog(t *testing.T, b *bundle, within time.Duration, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for logLines(b, parts...) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within %s", parts, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const waitingMsg = `"message":"waiting for JetStream: retrying with backoff"`

func TestPartitionCutOffWorkerPullsWithBackoff(t *testing.T) {
	c, b := clusterBundle(t, false)
	b.start(t, func(cfg *config.Config) { cfg.NATSURL = c.URLs(0) })
	consumerLeadersOff(t, b, c.Nodes[0].Server.Name())

	before := c.Nodes[0].Clients.Count()
	c.Isolate(0)
	cut := time.Now()
	time.Sleep(isolation())
	pulls := c.Nodes[0].Clients.Count() - before
	elapsed := time.Since(cut)
	// A failed pull is followed by at least the backoff's first delay
	// (500ms) and an answered one takes FetchWait (2s): each kind pulls at
	// most once per 500ms, plus the pull under way at the cut. Without
	// backoff a worker sends thousands a second.
	kinds := b.cfg.Kinds
	bound := int64(len(kinds)) * (int64(elapsed/(500*time.Millisecond)) + 2)
	t.Logf("figure: cut off for %s, %d pull requests (%.2f/s over %d kinds), bound %d",
		elapsed.Round(time.Millisecond), pulls, float64(pulls)/elapsed.Seconds(), len(kinds), bound)
	if pulls > bound {
		t.Errorf("a cut-off worker sent %d pull requests in %s; at most %d expected", pulls, elapsed, bound)
	}
	for _, kind := range kinds {
		if n := logLines(b, waitingMsg, `"loop":"pull `+kind+`"`); n != 1 {
			t.Errorf("pull %s said %d times that it waits for JetStream, want once", kind, n)
		}
	}

	c.Rejoin(0)
	healed := time.Now()
	publishRetry(t, b, "after-heal-1")
	if st := awaitFinished(t, b, []string{"after-heal-1"}, 90*time.Second); st["after-heal-1"] != state.StatusSucceeded {
		t.Fatalf("job after the heal: %v", st)
	}
	t.Logf("figure: first job finished %s after the heal", time.Since(healed).Round(time.Millisecond))
	awaitLog(t, b, 30*time.Second, `"message":"JetStream reachable again"`, `"loop":"pull video"`)
}

func TestPartitionWorkerStartedWhileCutOffServesAfterHeal(t *testing.T) {
	c, b := clusterBundle(t, true)
	c.Isolate(0)
	cfg := b.cfg
	cfg.NATSURL, cfg.HTTPAddr = c.URLs(0), freeAddr(t)
	// With a fleet quota, its bucket is part of the set-up that waits.
	cfg.FleetMediaTasks = 4
	ready, done, stop := b.launch(t, cfg)

	awaitLog(t, b, 60*time.Second, waitingMsg, `"loop":"setup"`)
	resp, err := http.Get("http://" + cfg.HTTPAddr + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "waiting for JetStream") {
		t.Errorf("readyz while cut off = %d %q, want 503 saying it waits for JetStream", resp.StatusCode, body)
	}
	time.Sleep(isolation())
	select {
	case err := <-done:
		done <- err
		t.Fatalf("the worker ended while the cluster was unreachable: %v", err)
	case <-ready:
		t.Fatal("the worker consumed while cut off from the cluster")
	default:
	}

	c.Rejoin(0)
	healed := time.Now()
	select {
	case <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("worker ended: %v", err)
	case <-time.After(120 * time.Second):
		t.Fatal("the worker did not consume within 120s of the heal")
	}
	t.Logf("figure: worker started during the partition consumed %s after the heal", time.Since(healed).Round(time.Millisecond))
	publishRetry(t, b, "started-cut-off-1")
	if st := awaitFinished(t, b, []string{"started-cut-off-1"}, 90*time.Second); st["started-cut-off-1"] != state.StatusSucceeded {
		t.Fatalf("job: %v", st)
	}
	t.Logf("figure: its first job finished %s after the heal", time.Since(healed).Round(time.Millisecond))
	stop()
	if n := logLines(b, `"level":"error"`); n != 0 {
		t.Errorf("%d error lines; a worker cut off at start must wait, not fail", n)
	}
}

func TestPartitionFleetMovesOffIsolatedNode(t *testing.T) {
	c, b := clusterBundle(t, false)
	moveAfter := 3 * time.Second
	if long() {
		moveAfter = 10 * time.Second
	}
	// Every worker knows all three nodes but connects to node 0: the
	// others refuse clients while the fleet starts.
	c.Nodes[1].Clients.Cut()
	c.Nodes[2].Clients.Cut()
	const workers = 2
	for i := range workers {
		b.start(t, func(cfg *config.Config) {
			cfg.NATSURL, cfg.NATSMoveAfter = c.URLs(0, 1, 2), moveAfter
			cfg.WorkerName = fmt.Sprintf("fleet-%d", i)
		})
	}
	c.Nodes[1].Clients.Heal()
	c.Nodes[2].Clients.Heal()

	c.Isolate(0)
	isolated := time.Now()
	var ids []string
	for i := range 6 {
		id := fmt.Sprintf("fleet-job-%d", i)
		publishRetry(t, b, id)
		ids = append(ids, id)
	}
	moved := make(chan time.Duration, 1)
	go func() {
		deadline := time.Now().Add(120 * time.Second)
		for logLines(b, "moving to another server") < workers && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		moved <- time.Since(isolated)
	}()
	statuses := awaitFinished(t, b, ids, 120*time.Second)
	finished := time.Since(isolated)
	for id, st := range statuses {
		if st != state.StatusSucceeded {
			t.Errorf("job %s: %s", id, st)
		}
	}
	tookToMove := <-moved
	if n := logLines(b, "moving to another server"); n < workers {
		t.Errorf("%d moves logged, want one per worker (%d)", n, workers)
	}
	t.Logf("figure: bound %s; every worker moved within %s of the isolation; all %d jobs finished %s after it",
		moveAfter, tookToMove.Round(time.Millisecond), len(ids), finished.Round(time.Millisecond))

	c.Rejoin(0)
	for _, id := range ids {
		b.await(t, id, 60*time.Second) // fails on a second terminal event
	}
}

// A server cut off from its cluster answers stream and consumer information
// requests from its own copy once their groups have lost their leader
// (nats-server does so for a member of a leaderless group). Such answers
// must not count as a leader answering: a worker whose sweep took them for
// one never moved off the isolated server (seen in CI). The bound is long
// enough that the isolated server's groups go leaderless before it, and no
// consumer leader is on the isolated server (whose "cut off" answers would
// move the worker at once).
func TestPartitionLeaderlessAnswersDoNotKeepWorkerOnIsolatedNode(t *testing.T) {
	c, b := clusterBundle(t, false)
	const moveAfter = 15 * time.Second
	// With no consumer leader on node 0 the pulls get no answer at all, and
	// only the leaderless answers could keep the worker there.
	consumerLeadersOff(t, b, c.Nodes[0].Server.Name())
	c.Nodes[1].Clients.Cut()
	c.Nodes[2].Clients.Cut()
	b.start(t, func(cfg *config.Config) {
		cfg.NATSURL, cfg.NATSMoveAfter = c.URLs(0, 1, 2), moveAfter
		cfg.WorkerName = "leaderless"
	})
	c.Nodes[1].Clients.Heal()
	c.Nodes[2].Clients.Heal()

	c.Isolate(0)
	isolated := time.Now()
	// Node 0 answers for SLUICE_JOBS with no leader: what the worker sees.
	nc0, err := nats.Connect(c.URLs(0))
	if err != nil {
		t.Fatalf("connect to node 0: %v", err)
	}
	defer nc0.Close()
	js0, err := jetstream.New(nc0)
	if err != nil {
		t.Fatal(err)
	}
	var leaderless time.Duration
	for deadline := time.Now().Add(90 * time.Second); leaderless == 0; {
		if time.Now().After(deadline) {
			t.Fatal("node 0 never answered SLUICE_JOBS's info without a leader")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if s, err := js0.Stream(ctx, contract.JobsStream); err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader == "" {
			leaderless = time.Since(isolated)
		}
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	awaitLog(t, b, 120*time.Second, "moving to another server")
	moved := time.Since(isolated)
	id := "leaderless-job"
	publishRetry(t, b, id)
	if st := awaitFinished(t, b, []string{id}, 90*time.Second)[id]; st != state.StatusSucceeded {
		t.Errorf("job %s: %s", id, st)
	}
	if n := logLines(b, "JetStream group has no leader"); n == 0 {
		t.Log("the worker moved before it saw a leaderless answer")
	}
	t.Logf("figure: node 0 answered without a leader %s after the isolation; bound %s; the worker moved %s after it",
		leaderless.Round(time.Millisecond), moveAfter, moved.Round(time.Millisecond))
}
