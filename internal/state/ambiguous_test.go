package state_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestWriteWithLostAnswer writes state records through a proxy that
// forwards a compare-and-set to the server and drops the server's answer,
// as a stream leader change can: the write is stored, the writer hears
// nothing. Update must read the record again and know its own write by
// its write id: it succeeds, and its change is applied once, not failed
// nor applied a second time.
func TestWriteWithLostAnswer(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	kv, nc, drop := bucketBehindDropper(t, ctx, contract.StateBucketConfig(contract.Options{}))
	st := state.NewStore(kv, "w1", nil)
	st.Direct(nc)
	st.SetTimeout(300 * time.Millisecond)
	count := func(r *state.Record) error { r.Attempts++; return nil }
	writes := "$KV." + contract.StateBucket + "."

	// The record's creation (UpdateNew's Create), then a compare-and-set
	// (Update), then one from a known record (UpdateFrom): each one's
	// answer lost.
	drop.Arm(writes, 1)
	rec, err := st.UpdateNew(ctx, "job-1", count)
	if err != nil {
		t.Fatalf("create with a lost answer: %v", err)
	}
	drop.Arm(writes, 1)
	if rec, err = st.Update(ctx, "job-1", count); err != nil {
		t.Fatalf("update with a lost answer: %v", err)
	}
	drop.Arm(writes, 1)
	if rec, err = st.UpdateFrom(ctx, rec, count); err != nil {
		t.Fatalf("update from a record with a lost answer: %v", err)
	}
	if got := drop.Dropped(); got != 3 {
		t.Fatalf("%d answers dropped, want 3", got)
	}
	stored, _, err := st.Get(ctx, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	if stored.Attempts != 3 || rec.Attempts != 3 || stored.WriteID != rec.WriteID {
		t.Errorf("after three counted writes: stored %d attempts (write %s), returned %d (write %s); want 3 and the same write",
			stored.Attempts, stored.WriteID, rec.Attempts, rec.WriteID)
	}
	// The returned record carries its revision: the next write from it
	// needs no read.
	if rec, err = st.UpdateFrom(ctx, rec, count); err != nil || rec.Attempts != 4 {
		t.Fatalf("next write: %+v, %v", rec, err)
	}
}

// TestKeepSpecWithLostAnswer keeps a job's spec through a proxy that loses
// the write's answer, once after the server applied the write and once
// before it reached the server, with a context that has no deadline, as a
// job's has: Keep must not wait for the answer for ever but read the key
// again and carry on from what is there, and the spec is kept once, as
// sent.
func TestKeepSpecWithLostAnswer(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	kv, nc, drop := bucketBehindDropper(t, ctx, contract.SpecsBucketConfig(contract.Options{}))
	specs := state.NewSpecs(kv)
	specs.Direct(nc)
	specs.SetTimeout(300 * time.Millisecond)
	writes := "$KV." + contract.SpecsBucket + "."
	for _, c := range []struct {
		name string
		arm  func(prefix string, n int)
	}{{"applied", drop.Arm}, {"unapplied", drop.ArmUnapplied}} {
		id, data := "job-"+c.name, []byte(`{"id":"job-`+c.name+`"}`)
		before := drop.Dropped()
		c.arm(writes, 1)
		done := make(chan error, 1)
		go func() { done <- specs.Keep(context.Background(), id, data) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: keep with a lost answer: %v", c.name, err)
			}
		case <-ctx.Done():
			t.Fatalf("%s: keep with a lost answer still waits for it", c.name)
		}
		if drop.Dropped() != before+1 {
			t.Fatalf("%s: nothing dropped", c.name)
		}
		got, err := specs.Get(ctx, id)
		if err != nil || string(got) != string(data) {
			t.Errorf("%s: kept spec %q, %v; want %q", c.name, got, err, data)
		}
	}
}

// bucketBehindDropper creates the bucket of cfg on a server of its own and
// opens it through a reply dropper, whose connection it returns too.
func bucketBehindDropper(t *testing.T, ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, *nats.Conn, *testenv.ReplyDropper) {
	t.Helper()
	n := testenv.StartNATS(t)
	if _, err := n.JS.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	drop := testenv.StartReplyDropper(t, strings.TrimPrefix(n.Server.ClientURL(), "nats://"))
	djs := drop.JetStream(t)
	kv, err := djs.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv, djs.Conn(), drop
}
