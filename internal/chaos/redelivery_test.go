package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestClusterRedeliversHeldJobs: job messages held unacknowledged by a
// worker that dies shortly before a node (the meta leader's, the job
// consumer's leader's) are delivered again once the cluster has a leader,
// while jobs keep arriving, another worker acknowledges jobs throughout and
// a restarting worker re-applies the contract's definitions. Stuck means
// "not delivered again within two minutes of the last fault", not a
// timing.
func TestClusterRedeliversHeldJobs(t *testing.T) {
	if !clusterLong() {
		t.Skip("part of the long cluster fault suite: run with SLUICE_CLUSTER_LONG=1 (make cluster-faults)")
	}
	const rounds = 8
	c := testenv.StartCluster(t, 3)
	cl := c.Client(t)
	ctx := testenv.Context(t, time.Duration(rounds)*time.Minute+5*time.Minute)
	opts := contract.Options{Replicas: 3, AckWait: 2 * time.Second}
	ensure := func(js jetstream.JetStream) {
		for ctx.Err() == nil {
			ectx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := contract.Ensure(ectx, js, opts)
			cancel()
			if err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ensure(cl.JS)
	kind := contract.Kinds[0]
	name := contract.ConsumerName(kind)

	var mu sync.Mutex
	published, acked, seqs := map[string]bool{}, map[string]bool{}, map[string]uint64{}
	seen := func(id string, seq uint64) {
		mu.Lock()
		seqs[id] = seq
		mu.Unlock()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // jobs keep arriving
		for k := 0; ; k++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			id := fmt.Sprintf("j-%05d", k)
			m := nats.NewMsg(contract.JobSubject(kind))
			m.Header.Set(contract.HeaderMsgID, id)
			m.Data = []byte(`{}`)
			for ctx.Err() == nil {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := cl.JS.PublishMsg(pctx, m)
				cancel()
				if err == nil {
					break
				}
			}
			mu.Lock()
			published[id] = true
			mu.Unlock()
		}
	})
	wc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	quit, workerDone := make(chan struct{}), make(chan struct{})
	defer func() { close(quit); <-workerDone }()
	go func() { // a worker acknowledges whatever it gets
		defer close(workerDone)
		for ctx.Err() == nil {
			select {
			case <-quit:
				return
			default:
			}
			for _, id := range pullSome(ctx, wc, name, 5, true, seen) {
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		}
	}()

	for round := range rounds {
		time.Sleep(2 * time.Second)
		// The holder takes some jobs and dies just before a node.
		hc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		held := pullSome(ctx, hc, name, 6, false, seen)
		target, what := c.MetaLeader(), "meta leader"
		if round%2 == 1 {
			target, what = c.ConsumerLeader(contract.JobsStream, name), "consumer leader"
		}
		if target < 0 {
			target = 0
		}
		hc.Close()
		time.Sleep(time.Duration(round%3) * 500 * time.Millisecond)
		c.KillNode(target)
		t.Logf("round %d: holder took %v; killed n%d (%s)", round+1, held, target+1, what)
		// A worker restarting re-applies the definitions meanwhile.
		done := make(chan struct{})
		go func() {
			defer close(done)
			rc, err := nats.Connect(c.URLs(), nats.MaxReconnects(-1))
			if err != nil {
				return
			}
			defer rc.Close()
			js, _ := jetstream.New(rc)
			ensure(js)
		}()
		time.Sleep(2 * time.Second)
		c.RestartNode(t, target)
		<-done
		if err := awaitCurrent(c); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	bg.Wait()
	// A job is stuck while it is still in the stream and no worker has
	// acknowledged it. (An acknowledgement whose answer was lost may have
	// been applied: such a job is gone from the stream, not stuck.)
	s, err := cl.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	var missing, stuck []string
	for {
		missing, stuck = missing[:0], stuck[:0]
		mu.Lock()
		for id := range published {
			if !acked[id] {
				missing = append(missing, id)
			}
		}
		mu.Unlock()
		for _, id := range missing {
			mu.Lock()
			seq, ok := seqs[id]
			mu.Unlock()
			if !ok {
				stuck = append(stuck, id+"@never-delivered")
				continue
			}
			if _, err := s.GetMsg(ctx, seq); !errors.Is(err, jetstream.ErrMsgNotFound) {
				stuck = append(stuck, fmt.Sprintf("%s@%d", id, seq))
			}
		}
		if len(stuck) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("%d jobs, %d not acknowledged by answer, %d of them still in the stream", len(published), len(missing), len(stuck))
	if len(stuck) > 0 {
		sort.Strings(stuck)
		logJobsState(t, c)
		t.Fatalf("%d of %d jobs stuck in the stream, never delivered again: %v", len(stuck), len(published), stuck)
	}
}

// pullSome pulls up to n messages of consumer name once (binding it first,
// retrying while there is no leader) and returns their Nats-Msg-Ids;
// with ack it acknowledges each (only those whose ack is confirmed are
// returned).
func pullSome(ctx context.Context, nc *nats.Conn, name string, n int, ack bool, seen func(id string, seq uint64)) []string {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil
	}
	for ctx.Err() == nil {
		bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		cn, err := js.Consumer(bctx, contract.JobsStream, name)
		cancel()
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		batch, err := cn.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		var got []string
		for m := range batch.Messages() {
			id := m.Headers().Get(contract.HeaderMsgID)
			if meta, err := m.Metadata(); err == nil {
				seen(id, meta.Sequence.Stream)
			}
			if ack {
				actx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := m.DoubleAck(actx)
				cancel()
				if err != nil {
					continue
				}
			}
			got = append(got, id)
		}
		if len(got) > 0 || ack {
			return got
		}
	}
	return nil
}
