package quota_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/testenv"
)

type bundle struct {
	js    jetstream.JetStream
	kv    jetstream.KeyValue
	clock *testenv.Clock
	// server is the bucket's server's clock on clock, shared by the
	// workers that do not have their own (own) and the test's reads, so
	// that all of them agree to the nanosecond on the windows of a rate.
	server *natsconn.Clock
}

func setup(t *testing.T) *bundle {
	t.Helper()
	n := testenv.StartNATS(t)
	kv, err := n.JS.CreateOrUpdateKeyValue(testenv.Context(t, 10*time.Second), quota.BucketConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	return newBundle(t, n.JS, kv, testenv.NewClock())
}

func newBundle(t *testing.T, js jetstream.JetStream, kv jetstream.KeyValue, clock *testenv.Clock) *bundle {
	t.Helper()
	b := &bundle{js: js, kv: kv, clock: clock, server: natsconn.NewClock(kv, clock.Now, zerolog.Nop())}
	if err := b.server.Sync(testenv.Context(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	return b
}

// fleet starts one worker's side of the quotas; stop ends its Run.
func (b *bundle) fleet(t *testing.T, holder string, limits quota.Limits) (f *quota.Fleet, stop func()) {
	t.Helper()
	return b.fleetOn(t, holder, limits, b.server)
}

// fleetOn is fleet on clock (nil: the worker's own, over its skew).
func (b *bundle) fleetOn(t *testing.T, holder string, limits quota.Limits, clock *natsconn.Clock) (f *quota.Fleet, stop func()) {
	t.Helper()
	return runFleet(t, quota.Config{KV: b.kv, Conn: b.js.Conn(), Holder: holder, Limits: limits, TTL: time.Minute, Now: b.clock.Now, Clock: clock})
}

// runFleet makes a fleet of cfg and runs it until the test ends or stop.
func runFleet(t *testing.T, cfg quota.Config) (f *quota.Fleet, stop func()) {
	t.Helper()
	f, err := quota.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	stop = sync.OnceFunc(func() { cancel(); <-done })
	t.Cleanup(stop)
	return f, stop
}

// jobRun is jobs taking a lease in turn on several workers, each holding
// it a moment.
type jobRun struct {
	held, peak, granted atomic.Int64
	wg                  sync.WaitGroup
}

// runJobs starts n jobs, spread over fleets, that each acquire a lease,
// hold it 5ms and release it; peak is the most holding one at once (a job
// stops counting before its release lands on the board).
func runJobs(ctx context.Context, t *testing.T, fleets []*quota.Fleet, n int) *jobRun {
	r := &jobRun{}
	for i := range n {
		f := fleets[i%len(fleets)]
		r.wg.Go(func() {
			l, err := f.Acquire(ctx, "video", fmt.Sprintf("job-%d", i), "")
			if err != nil {
				t.Error(err)
				return
			}
			h := r.held.Add(1)
			for p := r.peak.Load(); h > p && !r.peak.CompareAndSwap(p, h); p = r.peak.Load() {
			}
			time.Sleep(5 * time.Millisecond)
			r.held.Add(-1)
			l.Release()
			r.granted.Add(1)
		})
	}
	return r
}

func (r *jobRun) wait() { r.wg.Wait() }

// twoWorkers starts a bundle and two workers' sides (w1, w2) with limits.
func twoWorkers(t *testing.T, limits quota.Limits) (b *bundle, f1 *quota.Fleet, stop1 func(), f2 *quota.Fleet) {
	t.Helper()
	b = setup(t)
	f1, stop1 = b.fleet(t, "w1", limits)
	f2, _ = b.fleet(t, "w2", limits)
	return b, f1, stop1, f2
}

// eventually polls cond until it holds or the test's patience ends.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func read(t *testing.T, b *bundle, res string) quota.Status {
	t.Helper()
	sts, err := quota.Read(testenv.Context(t, 5*time.Second), b.js, b.server.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		if st.Resource == res {
			return st
		}
	}
	return quota.Status{Resource: res}
}

func TestLeasesNeverExceedTheLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	b, f1, _, f2 := twoWorkers(t, quota.Limits{MediaTasks: 3})
	ctx := testenv.Context(t, 60*time.Second)

	jobs := runJobs(ctx, t, []*quota.Fleet{f1, f2}, 24)
	jobs.wait()
	if n := jobs.granted.Load(); n != 24 {
		t.Fatalf("%d of 24 jobs got a lease", n)
	}
	if p := jobs.peak.Load(); p > 3 {
		t.Fatalf("%d jobs held a lease at once, limit 3", p)
	}
	eventually(t, "every lease given back", func() bool { return read(t, b, quota.Media).InUse == 0 })
}

func TestDeadWorkersLeasesAreTakenOverOrLapse(t *testing.T) {
	t.Parallel()
	b, f1, stop1, f2 := twoWorkers(t, quota.Limits{MediaTasks: 2})
	ctx := testenv.Context(t, 30*time.Second)
	for _, job := range []string{"a", "b"} {
		if _, err := f1.Acquire(ctx, "video", job, ""); err != nil {
			t.Fatal(err)
		}
	}
	stop1() // w1 dies holding both leases

	got := make(chan error, 1)
	go func() {
		_, err := f2.Acquire(ctx, "speech", "c", "")
		got <- err
	}()
	eventually(t, "w2 waits on the board", func() bool { return read(t, b, quota.Media).Waiting == 1 })
	select {
	case err := <-got:
		t.Fatalf("w2 got a lease while w1's were alive: %v", err)
	default:
	}
	// Past their expiry, w1's leases count as handed back: their tasks
	// may still run upstream, and w2 may pull their jobs to take them
	// over, but not start a new one.
	b.clock.Advance(61 * time.Second)
	eventually(t, "w2 may pull a job of w1's", func() bool {
		n := f2.Reserve("video", 1)
		f2.Unreserve("video", n)
		return n == 1
	})
	f2.Take("video", "a", "")
	eventually(t, "w2 holds a", func() bool { return f2.Statuses()[0].Held == 1 })
	select {
	case err := <-got:
		t.Fatalf("w2 started a new job while w1's leases counted: %v", err)
	default:
	}
	// b was never taken over: it lapses after its grace (two lease lives).
	b.clock.Advance(120 * time.Second)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if st := read(t, b, quota.Media); st.InUse != 2 || st.Waiting != 0 {
		t.Fatalf("after w1's lease of b lapsed: %+v, want 2 in use (a, c) and none waiting", st)
	}
}

func TestHandedBackLeaseIsTakenOverByTheNextDelivery(t *testing.T) {
	t.Parallel()
	_, f1, _, f2 := twoWorkers(t, quota.Limits{ComputeJobs: 1})
	ctx := testenv.Context(t, 30*time.Second)

	l, err := f1.Acquire(ctx, "compute", "x", "")
	if err != nil {
		t.Fatal(err)
	}
	l.HandBack(0) // w1 stops; the job's task is still upstream
	eventually(t, "w2 may pull the handed-back job", func() bool { return f2.Reserve("compute", 1) == 1 })
	f2.Take("compute", "x", "")
	eventually(t, "w2 holds x", func() bool {
		st := f2.Statuses()
		return len(st) == 1 && st[0].Held == 1 && st[0].InUse == 1
	})
	// The quota is full: a new job waits, the takeover did not free it.
	eventually(t, "w1 may pull no new job while x holds the only lease", func() bool {
		n := f1.Reserve("compute", 1)
		f1.Unreserve("compute", n)
		return n == 0
	})
	// A takeover while full: w1 gets x back on a redelivery, whatever the
	// limit, and w2 learns it lost it.
	f1.Take("compute", "x", "")
	eventually(t, "w1 holds x again, w2 none", func() bool {
		s1, s2 := f1.Statuses(), f2.Statuses()
		return s1[0].Held == 1 && s1[0].InUse == 1 && s2[0].Held == 0
	})
}

func TestFleetRateSharesEachWindow(t *testing.T) {
	t.Parallel()
	b, f1, _, f2 := twoWorkers(t, quota.Limits{MediaRate: 5})
	ctx := testenv.Context(t, 60*time.Second)

	var sent atomic.Int64
	var wg sync.WaitGroup
	for i := range 12 {
		f := f1
		if i%2 == 1 {
			f = f2
		}
		rt := f.Transport(quota.Media, roundTripFunc(func() { sent.Add(1) }))
		wg.Go(func() {
			req, _ := newRequest(ctx)
			if _, err := rt.RoundTrip(req); err != nil {
				t.Error(err)
			}
		})
	}
	for w := 1; w <= 3; w++ {
		want := min(int64(5*w), 12)
		eventually(t, "the window's requests are sent", func() bool { return sent.Load() >= want })
		if n := sent.Load(); n > want {
			t.Fatalf("%d requests sent in %d windows of 5", n, w)
		}
		b.clock.Advance(time.Second)
	}
	wg.Wait()
}

// TestTwoDeliveriesOfAJobShareItsLease: two deliveries of one job hold one
// lease. On one worker the first to end does not give it back under the
// other; on two, the later delivery does not take it from the worker that
// holds it (its giving it back would free the place the first delivery's
// task counts in: the cluster fault suite saw 9 tasks of 8 so), but waits.
func TestTwoDeliveriesOfAJobShareItsLease(t *testing.T) {
	t.Parallel()
	b, f1, _, f2 := twoWorkers(t, quota.Limits{MediaTasks: 2})
	ctx := testenv.Context(t, 30*time.Second)

	first, err := f1.Acquire(ctx, "video", "j", "")
	if err != nil {
		t.Fatal(err)
	}
	second, err := f1.Acquire(ctx, "video", "j", "")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "one lease for both", func() bool { return read(t, b, quota.Media).InUse == 1 })
	second.Release()
	time.Sleep(300 * time.Millisecond)
	if st := read(t, b, quota.Media); st.InUse != 1 {
		t.Fatalf("after one of two deliveries let go: %+v, want the lease still held", st)
	}

	// On w2, a delivery of j waits while w1 holds it.
	got := make(chan *quota.Lease, 1)
	go func() {
		l, err := f2.Acquire(ctx, "video", "j", "")
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, "w2 waits for j", func() bool { return read(t, b, quota.Media).Waiting == 1 })
	select {
	case <-got:
		t.Fatal("w2 took j's lease from w1, which holds it")
	case <-time.After(300 * time.Millisecond):
	}
	// A new job still fits beside j.
	if _, err := f2.Acquire(ctx, "speech", "k", ""); err != nil {
		t.Fatal(err)
	}
	first.Release()
	l := <-got
	eventually(t, "w2 holds j and k", func() bool {
		st := read(t, b, quota.Media)
		return st.InUse == 2 && st.Waiting == 0 && f2.Statuses()[0].Held == 2
	})
	l.Release()
	eventually(t, "only k", func() bool { return read(t, b, quota.Media).InUse == 1 })
}

// A worker whose reads of the board come from a replica behind the last
// writes still gets its leases and its share of the rate: after a write
// lost to a conflict it reads the board from the bucket's leader. (Reading
// the same replica again, it would fail every write for as long as the
// replica stays behind, its jobs waiting for a lease all that time.)
func TestABoardReadBehindTheLeaderHoldsNobodyUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.kv = testenv.Behind(b.kv)
	f, _ := b.fleet(t, "w1", quota.Limits{MediaTasks: 2, MediaRate: 50})
	ctx := testenv.Context(t, 20*time.Second)
	for i := range 5 {
		lease, err := f.Acquire(ctx, "video", fmt.Sprintf("job-%d", i), "")
		if err != nil {
			t.Fatalf("job-%d: no lease: %v", i, err)
		}
		lease.Release()
	}
	// 50 a second, claimed 5 at a time: 30 requests take 6 claims of the
	// same window (the test's clock stands still).
	var sent atomic.Int64
	client := &http.Client{Transport: f.Transport(quota.Media, roundTripFunc(func() { sent.Add(1) }))}
	for range 30 {
		req, err := newRequest(ctx)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", sent.Load()+1, err)
		}
		resp.Body.Close()
	}
	if st := read(t, b, quota.Media); st.RateUsed != 30 {
		t.Errorf("the window counts %d requests, want 30", st.RateUsed)
	}
}

// A lease handed back counts for its own job's next delivery only: on a
// resource two kinds share (media: video and speech), the other kind may
// not pull a job on it, and a job of the other kind already waiting for a
// place does not take it from the delivery it is kept for. Otherwise the
// lease lapses while its task still runs, the job waiting in its place
// starts, and the fleet is over its quota.
func TestHandedBackLeaseIsKeptForItsJob(t *testing.T) {
	t.Parallel()
	_, f1, _, f2 := twoWorkers(t, quota.Limits{MediaTasks: 1})
	ctx := testenv.Context(t, 30*time.Second)

	l, err := f1.Acquire(ctx, "video", "v", "")
	if err != nil {
		t.Fatal(err)
	}
	l.HandBack(0) // the task still runs upstream; its job comes back
	// w2's view must hold the lease, handed back: on a view read before
	// w1's grant the place is free (any kind may pull for it), and on one
	// read before the hand-back w1 holds it. The view only moves on (the
	// clock stands still), so once it shows the lease a video job w2 may
	// pull after is one for the handed-back lease. (Reserve also asks w2
	// to read the board again.)
	eventually(t, "w2 sees the handed-back lease", func() bool {
		st := f2.Statuses()
		n := f2.Reserve("video", 1)
		f2.Unreserve("video", n)
		return st[0].InUse == 1 && st[0].Held == 0 && n == 1
	})
	if n := f2.Reserve("speech", 1); n != 0 {
		t.Errorf("w2 may pull %d speech job on the video job's handed-back lease, want 0", n)
		f2.Unreserve("speech", n)
	}
	// A speech job waiting for a place on w2 does not hold the video job's
	// next delivery back.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = f2.Acquire(sctx, "speech", "s", "") }()
	eventually(t, "the speech job waits on w2", func() bool {
		st := f2.Statuses()
		return len(st) == 1 && st[0].WaitingHere == 1
	})
	if n := f2.Reserve("video", 1); n != 1 {
		t.Errorf("with a speech job waiting, w2 may pull %d video job for the handed-back lease, want 1", n)
	}
	f2.Take("video", "v", "")
	eventually(t, "w2 holds v, s still waits", func() bool {
		st := f2.Statuses()
		return st[0].Held == 1 && st[0].InUse == 1 && st[0].WaitingHere == 1
	})
}

// TestConflictsLowerTheEffectiveLimitAcrossWorkers: a conflict heard by
// one worker lowers the effective limit the other grants by, readers of
// the board see it, and it grows back one step per quiet interval once
// the conflicts stop.
func TestConflictsLowerTheEffectiveLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	aimd := quota.AIMD{Window: time.Second, Raise: 5 * time.Second, Probe: time.Minute}
	start := func(holder string) *quota.Fleet {
		f, _ := runFleet(t, quota.Config{KV: b.kv, Conn: b.js.Conn(), Holder: holder, Limits: quota.Limits{MediaTasks: 10},
			TTL: time.Minute, Now: b.clock.Now, Clock: b.server, AIMD: aimd})
		return f
	}
	f1, f2 := start("w1"), start("w2")
	ctx := testenv.Context(t, 60*time.Second)
	var held []*quota.Lease
	for i := range 10 {
		l, err := f1.Acquire(ctx, "video", fmt.Sprintf("a%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	f1.Conflict("video", "a9")
	eventually(t, "the board's effective limit is 7", func() bool { return read(t, b, quota.Media).Effective == 7 })
	eventually(t, "w2 grants by 7", func() bool { return f2.Statuses()[0].Effective == 7 })
	for _, l := range held {
		l.Release()
	}
	// Eight jobs on w2: seven get a lease, the eighth waits.
	held = held[:0]
	for i := range 7 {
		l, err := f2.Acquire(ctx, "video", fmt.Sprintf("b%d", i), "")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	eighth := make(chan error, 1)
	go func() {
		l, err := f2.Acquire(ctx, "video", "b7", "")
		l.Release()
		eighth <- err
	}()
	eventually(t, "seven granted, one waiting", func() bool { return read(t, b, quota.Media).Waiting == 1 })
	if st := read(t, b, quota.Media); st.Limit != 10 || st.InUse != 7 {
		t.Errorf("%+v, want 7 in use of the configured 10", st)
	}

	// The conflicts stop: one more per quiet interval with a round of
	// grants, never more than one at once.
	b.clock.Advance(aimd.Raise)
	for _, l := range held {
		l.Release()
	}
	if err := <-eighth; err != nil {
		t.Fatal(err)
	}
	for want := 8; want <= 9; want++ {
		eventually(t, fmt.Sprintf("the effective limit grows to %d", want), func() bool {
			return read(t, b, quota.Media).Effective == want
		})
		b.clock.Advance(aimd.Raise)
		runJobs(ctx, t, []*quota.Fleet{f1, f2}, want).wait()
	}
	if st := read(t, b, quota.Media); st.Effective != 9 {
		t.Fatalf("effective %d, want 9 until a long quiet (10 is where the conflict came)", st.Effective)
	}
	b.clock.Advance(aimd.Probe)
	runJobs(ctx, t, []*quota.Fleet{f1, f2}, 4*9).wait()
	eventually(t, "the effective limit back at the configured 10", func() bool { return read(t, b, quota.Media).Effective == 10 })
}

// TestLateConflictOfAnEarlierGrantCutsOnce: leases granted together whose
// submits are refused over more than the window (they queued behind a
// rate) cut the effective limit once, on the first refusal; a lease
// granted after the cut and refused cuts again.
func TestLateConflictOfAnEarlierGrantCutsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	aimd := quota.AIMD{Window: time.Second, Raise: time.Hour, Probe: time.Hour}
	f, _ := runFleet(t, quota.Config{KV: b.kv, Conn: b.js.Conn(), Holder: "w1", Limits: quota.Limits{MediaTasks: 10},
		TTL: time.Minute, Now: b.clock.Now, Clock: b.server, AIMD: aimd})
	ctx := testenv.Context(t, 30*time.Second)

	var err error
	leases := map[string]*quota.Lease{}
	for i := range 10 {
		id := fmt.Sprintf("a%d", i)
		if leases[id], err = f.Acquire(ctx, "video", id, ""); err != nil {
			t.Fatal(err)
		}
	}
	refuse := func(id string) {
		b.clock.Advance(3 * aimd.Window)
		f.Conflict("video", id)
		leases[id].Release()
	}
	refuse("a9")
	eventually(t, "the first refusal cuts to 7", func() bool { return read(t, b, quota.Media).Effective == 7 })
	refuse("a8")
	eventually(t, "the late refusal given back", func() bool { return read(t, b, quota.Media).InUse == 8 })
	if st := read(t, b, quota.Media); st.Effective != 7 {
		t.Fatalf("effective %d after a late refusal of a lease granted before the cut, want 7 still", st.Effective)
	}
	// A lease granted by the lowered limit, refused: a new over-commit.
	leases["a7"].Release()
	leases["a6"].Release()
	if leases["b0"], err = f.Acquire(ctx, "video", "b0", ""); err != nil {
		t.Fatal(err)
	}
	refuse("b0")
	eventually(t, "a refusal of a lease granted since cuts again", func() bool { return read(t, b, quota.Media).Effective < 7 })
}

// TestRateShownBeforeAnyRequest: a worker with a fleet rate puts it on the
// board when it starts, so `enqueue quota` shows the rate in force before
// the first request, not "-" as if none were set; the window's count is
// left alone.
func TestRateShownBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fleet(t, "w1", quota.Limits{MediaRate: 7})
	eventually(t, "the media rate on the board", func() bool {
		st := read(t, b, quota.Media)
		return st.Rate == 7 && st.RateUsed == 0
	})
}
