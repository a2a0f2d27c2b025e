package quota_test

import (
	"cmp"
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestDeadHoldersLeasesLapseForASuccessor: holder A, fleet limit 2, is
// granted both leases and dies without giving them back. B starts after
// A died, so it never hears A alive and cannot hand A's leases over
// (watch): it must get its lease once A's leases expired and their grace
// (two lease lives from B's first write that saw them expired) ran out,
// about three lease lives, whether A had a job waiting too and whatever
// B's clock's offset from the server's.
func TestDeadHoldersLeasesLapseForASuccessor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		aWaits     bool
		bOffset    time.Duration
		startLater time.Duration
		bName      string
	}{
		{name: "plain"},
		{name: "a waiting too", aWaits: true},
		{name: "b a second behind", bOffset: -time.Second},
		{name: "b a second behind, a waiting", aWaits: true, bOffset: -time.Second},
		{name: "b starts after the expiry", startLater: 90 * time.Second},
		{name: "a restarted under its name", aWaits: true, bName: "A"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			limits := quota.Limits{MediaTasks: 2}
			fa, stopA := b.fleet(t, "A", limits)
			ctx := testenv.Context(t, 60*time.Second)
			for _, job := range []string{"a1", "a2"} {
				if _, err := fa.Acquire(ctx, "video", job, ""); err != nil {
					t.Fatal(err)
				}
			}
			if tc.aWaits {
				actx, cancel := context.WithCancel(ctx)
				defer cancel()
				go func() { _, _ = fa.Acquire(actx, "video", "a3", "") }()
				eventually(t, "A's third job waits on the board", func() bool { return read(t, b, quota.Media).Waiting == 1 })
			}
			stopA() // A dies holding both leases: it never writes again
			// B's clock reads the server's time before the test clock
			// moves: the server's own clock does not follow the test's.
			clock := b.skewed(tc.bOffset)
			if err := clock.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			b.clock.Advance(tc.startLater)

			fb, _ := b.fleetOn(t, cmp.Or(tc.bName, "B"), limits, clock)
			got := make(chan error, 1)
			go func() {
				_, err := fb.Acquire(ctx, "video", "b1", "")
				got <- err
			}()
			// The lease life is a minute: time runs on in steps of a
			// quarter of it, each long enough (in real time) for B to
			// read and write the board a few times.
			const lives = 10
			for step := 0; ; step++ {
				select {
				case err := <-got:
					if err != nil {
						t.Fatal(err)
					}
					if st := read(t, b, quota.Media); st.InUse != 1 {
						t.Fatalf("B granted at step %d: %+v, want b1 alone in use", step, st)
					}
					t.Logf("B granted after %s of the test clock", time.Duration(step)*15*time.Second+tc.startLater)
					return
				case <-time.After(300 * time.Millisecond):
				}
				if step >= lives*4 {
					t.Fatalf("B got no lease within %d lease lives of A's death: board %+v, leases %+v",
						lives, read(t, b, quota.Media), b.boardLeases(t, quota.Media))
				}
				b.clock.Advance(15 * time.Second)
			}
		})
	}
}

// TestDeadHoldersLeasesLapseForASuccessorOnTheWallClock is the same on
// the wall clock, with a lease life of two seconds: B, started after A
// died, may pull a job and gets its lease about three lease lives after
// A's last write.
func TestDeadHoldersLeasesLapseForASuccessorOnTheWallClock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := func(holder string, now func() time.Time) (*quota.Fleet, func()) {
		return runFleet(t, quota.Config{KV: b.kv, Conn: b.js.Conn(), Holder: holder, Limits: quota.Limits{MediaTasks: 2}, TTL: 2 * time.Second, Now: now})
	}
	ctx := testenv.Context(t, 60*time.Second)
	fa, stopA := start("A", nil)
	for _, job := range []string{"a1", "a2"} {
		if _, err := fa.Acquire(ctx, "video", job, ""); err != nil {
			t.Fatal(err)
		}
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = fa.Acquire(actx, "video", "a3", "") }()
	eventually(t, "A's third job waits on the board", func() bool {
		return read(t, b, quota.Media).Waiting == 1
	})
	stopA()

	fb, _ := start("B", func() time.Time { return time.Now().Add(-time.Second) })
	// B's consumer is let pull a job (as a worker pulls before it asks
	// for the job's lease), then the job waits for its lease.
	eventually(t, "B may pull a job", func() bool { return fb.Reserve("video", 1) == 1 })
	if _, err := fb.Acquire(ctx, "video", "b1", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b1 alone in use", func() bool { return read(t, b, quota.Media).InUse == 1 })
}
