package state_test

import (
	"strings"
	"testing"
	"time"

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
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, time.Minute)
	if _, err := n.JS.CreateOrUpdateKeyValue(ctx, contract.StateBucketConfig(contract.Options{})); err != nil {
		t.Fatal(err)
	}
	drop := testenv.StartReplyDropper(t, strings.TrimPrefix(n.Server.ClientURL(), "nats://"))
	djs := drop.JetStream(t)
	kv, err := djs.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewStore(kv, "w1", nil)
	st.Direct(djs.Conn())
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
