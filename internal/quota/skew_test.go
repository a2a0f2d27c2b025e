package quota_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// skewed is the bucket's server's clock as read by a worker whose own
// clock is off by offset.
func (b *bundle) skewed(offset time.Duration) *natsconn.Clock {
	return natsconn.NewClock(b.kv, func() time.Time { return b.clock.Now().Add(offset) }, zerolog.Nop())
}

// boardLease is one lease as the board stores it.
type boardLease struct {
	Holder string `json:"holder"`
	Exp    int64  `json:"exp"`
	Lapsed int64  `json:"lapsed"`
}

func (b *bundle) boardLeases(t *testing.T, res string) map[string]boardLease {
	t.Helper()
	e, err := b.kv.Get(testenv.Context(t, 5*time.Second), "leases."+res)
	if err != nil {
		t.Fatal(err)
	}
	var bd struct {
		Leases map[string]boardLease `json:"leases"`
	}
	if err := json.Unmarshal(e.Value(), &bd); err != nil {
		t.Fatal(err)
	}
	return bd.Leases
}

// TestClockSkewKeepsTheFleetInItsQuota: a holder whose clock is ten
// minutes behind writes the expiries a holder with the right clock would
// (the server's time and a lease life), so a worker whose clock is ahead
// neither sees its lease as expired nor lets its place go early: a lease
// handed back with its job counts a lease life and a grace on the
// server's clock, the job's next delivery takes it over, and a new job
// waits until it is released.
func TestClockSkewKeepsTheFleetInItsQuota(t *testing.T) {
	t.Parallel()
	b := setup(t)
	limits := quota.Limits{MediaTasks: 1}
	f1, _ := b.fleetOn(t, "behind", limits, b.skewed(-10*time.Minute))
	f2, _ := b.fleetOn(t, "ahead", limits, b.skewed(90*time.Second))
	ctx := testenv.Context(t, 60*time.Second)

	l, err := f1.Acquire(ctx, "video", "a", "")
	if err != nil {
		t.Fatal(err)
	}
	lease := b.boardLeases(t, quota.Media)["a"]
	if want := b.server.Now().Add(time.Minute); lease.Holder != "behind" || absDur(time.UnixMilli(lease.Exp).Sub(want)) > 5*time.Second {
		t.Fatalf("the behind holder's lease: %+v, want it to expire about %s (the server's time and a lease life)", lease, want)
	}
	l.HandBack(0) // the worker stops; a's task is still upstream

	got := make(chan error, 1)
	go func() {
		_, err := f2.Acquire(ctx, "video", "b", "")
		got <- err
	}()
	eventually(t, "b waits while a's lease counts", func() bool {
		st := read(t, b, quota.Media)
		return st.InUse == 1 && st.Waiting == 1
	})
	// Past a's expiry on the server's clock, but within its grace: a
	// still counts, and w2 writes when its grace began. (Had the behind
	// holder written its own time, a would have expired at once, and its
	// grace, begun then, would be over: b would have taken its place.)
	b.clock.Advance(150 * time.Second)
	eventually(t, "a past its expiry", func() bool { return b.boardLeases(t, quota.Media)["a"].Lapsed != 0 })
	if st := read(t, b, quota.Media); st.InUse != 1 || st.Waiting != 1 {
		t.Fatalf("within a's grace: %+v, want a counting and b waiting", st)
	}
	// a's next delivery reaches w2 and takes its lease over: b still waits.
	la := f2.Take("video", "a", "")
	eventually(t, "w2 holds a", func() bool { return b.boardLeases(t, quota.Media)["a"].Holder == "ahead" })
	select {
	case err := <-got:
		t.Fatalf("b got a lease while a held the only one: %v", err)
	default:
	}
	if st := read(t, b, quota.Media); st.InUse != 1 {
		t.Fatalf("after the takeover: %+v, want 1 in use", st)
	}
	la.Release() // a's task ended
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if st := read(t, b, quota.Media); st.InUse != 1 || st.Waiting != 0 {
		t.Fatalf("after a ended: %+v, want b alone in use", st)
	}
}

func absDur(d time.Duration) time.Duration { return max(d, -d) }
