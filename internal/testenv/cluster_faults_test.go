package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestClusterKillRestartStepDown kills a stream's leader, sees another
// node take over, restarts the killed node on its store directory, sees it
// catch up with what was written meanwhile, and steps the stream's leader
// and the meta leader down.
func TestClusterKillRestartStepDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster; skipped with -short")
	}
	c := testenv.StartCluster(t, 3)
	cl := c.Client(t)
	ctx := testenv.Context(t, 2*time.Minute)
	const stream = "FAULTS"
	if _, err := cl.JS.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{"faults.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	publish := func(n int) {
		t.Helper()
		for k := range n {
			for {
				pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := cl.JS.Publish(pctx, "faults.x", []byte(fmt.Sprint(k)))
				cancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("publish: %v", err)
				}
			}
		}
	}
	publish(5)
	old, err := c.AwaitStreamLeader(stream, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.KillNode(old)
	if !c.Down(old) {
		t.Fatal("killed node not down")
	}
	now, err := c.AwaitStreamLeader(stream, time.Minute)
	if err != nil || now == old {
		t.Fatalf("after killing leader n%d: leader %d, %v", old+1, now, err)
	}
	publish(5)
	c.RestartNode(t, old)
	deadline := time.Now().Add(time.Minute)
	for !c.StreamCurrent(stream) {
		if time.Now().After(deadline) {
			t.Fatal("the restarted node did not catch up")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s, err := cl.JS.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 10 {
		t.Fatalf("stream after the restart: %+v, %v", info, err)
	}

	led, err := c.StepDownStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Minute)
	for l := c.StreamLeader(stream); l < 0 || l == led; l = c.StreamLeader(stream) {
		if time.Now().After(deadline) {
			t.Fatalf("stream leader still n%d after its step-down", led+1)
		}
		time.Sleep(20 * time.Millisecond)
	}

	meta, err := c.AwaitMetaLeader(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if led, err := c.StepDownMeta(); err != nil || led != meta {
		t.Fatalf("meta step-down of n%d: led n%d, %v", meta+1, led+1, err)
	}
	deadline = time.Now().Add(time.Minute)
	for l := c.MetaLeader(); l < 0 || l == meta; l = c.MetaLeader() {
		if time.Now().After(deadline) {
			t.Fatalf("meta leader still n%d after its step-down", meta+1)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
