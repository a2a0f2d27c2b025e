package quota

import (
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func in(holder string, limit int) intent {
	return intent{holder: holder, now: t0, ttl: time.Minute, limit: limit, keep: map[string]bool{}}
}

func leased(holder string, exp time.Time) lease { return lease{Holder: holder, Exp: exp.UnixMilli()} }

// later is a lease's expiry a lease life after t0; full is a board of
// limit 2 whose leases w1 holds.
var (
	later = t0.Add(time.Minute)
	full  = board{Limit: 2, Grace: 120000, Leases: map[string]lease{"a": leased("w1", later), "b": leased("w1", later)}}
)

func TestPlanGrants(t *testing.T) {
	t.Parallel()
	t.Run("grants up to the limit, first come first", func(t *testing.T) {
		i := in("w1", 2)
		i.want = []string{"j1", "j2", "j3"}
		out := plan(board{}, i)
		if !slices.Equal(out.granted, []string{"j1", "j2"}) || !out.changed {
			t.Fatalf("granted %v changed %v", out.granted, out.changed)
		}
		if w := out.next.Waiting["w1"]; w.Jobs != 1 {
			t.Fatalf("waiting %+v, want w1 waiting with 1 job", out.next.Waiting)
		}
	})
	t.Run("full board grants nothing and registers the waiter", func(t *testing.T) {
		i := in("w2", 2)
		i.want = []string{"j"}
		out := plan(full, i)
		if len(out.granted) != 0 || out.next.Waiting["w2"].Jobs != 1 {
			t.Fatalf("granted %v waiting %+v", out.granted, out.next.Waiting)
		}
	})
}

func TestPlanExpiredLeases(t *testing.T) {
	t.Parallel()
	t.Run("an expired lease counts as handed back for its grace, then lapses", func(t *testing.T) {
		b := leased("dead", t0.Add(-3*time.Minute))
		b.Lapsed = t0.Add(-2 * time.Minute).UnixMilli()
		old := board{Limit: 2, Grace: 120000, Leases: map[string]lease{"a": leased("dead", t0.Add(-time.Second)), "b": b}}
		i := in("w2", 2)
		i.want = []string{"j1", "j2"}
		out := plan(old, i)
		if len(out.granted) != 1 || out.next.Leases["a"].Holder != "" || out.next.handedBack() != 1 {
			t.Fatalf("granted %v leases %+v", out.granted, out.next.Leases)
		}
		// Its own kept lease, past expiry (the worker could not write for
		// a while), is the worker's again, not lost.
		i = in("dead", 2)
		i.keep["a"] = true
		out = plan(old, i)
		if len(out.lost) != 0 || out.next.Leases["a"].Holder != "dead" {
			t.Fatalf("lost %v leases %+v", out.lost, out.next.Leases)
		}
	})
	t.Run("after an outage longer than a lease's life and grace, expired leases count until a grace after the first write", func(t *testing.T) {
		// Nobody could write the board for five minutes: its leases expired
		// unseen, and their holders may be alive with tasks upstream.
		old := board{Limit: 2, Grace: 120000, Leases: map[string]lease{"a": leased("w1", t0.Add(-4*time.Minute)), "b": leased("w1", t0.Add(-4*time.Minute))}}
		i := in("w2", 2)
		i.want = []string{"j1"}
		out := plan(old, i)
		if len(out.granted) != 0 || len(out.next.Leases) != 2 || out.next.Leases["a"].Lapsed != t0.UnixMilli() || !out.changed {
			t.Fatalf("right after the outage: granted %v leases %+v changed %v", out.granted, out.next.Leases, out.changed)
		}
		// Planned again on what it wrote: nothing changes (a write whose
		// answer was lost is recognised).
		if again := plan(out.next, i); again.changed || len(again.granted) != 0 {
			t.Fatalf("planned again: granted %v changed %v", again.granted, again.changed)
		}
		// Its holder renews within the grace: the lease is its own again.
		k := in("w1", 2)
		k.now = t0.Add(70 * time.Second)
		k.keep["a"] = true
		renewed := plan(out.next, k)
		if l := renewed.next.Leases["a"]; l.Holder != "w1" || l.Lapsed != 0 || len(renewed.lost) != 0 {
			t.Fatalf("renewed: %+v lost %v", renewed.next.Leases, renewed.lost)
		}
		// The other, whose holder never came back, lapses a grace (two
		// lease lives) after the first write saw it expired.
		i.now = t0.Add(2 * time.Minute)
		out = plan(renewed.next, i)
		if !slices.Equal(out.granted, []string{"j1"}) || out.next.Leases["a"].Holder != "w1" || len(out.next.Leases) != 2 {
			t.Fatalf("a grace later: granted %v leases %+v", out.granted, out.next.Leases)
		}
	})
}

func TestPlanHeldLeases(t *testing.T) {
	t.Parallel()
	t.Run("expired leases without grace are ignored and pruned", func(t *testing.T) {
		old := board{Limit: 2, Leases: map[string]lease{"a": leased("dead", t0), "b": leased("dead", t0.Add(-time.Second))}}
		i := in("w2", 2)
		i.want = []string{"j1", "j2"}
		out := plan(old, i)
		if len(out.granted) != 2 || len(out.next.Leases) != 2 || out.next.Leases["a"].Holder != "" {
			t.Fatalf("granted %v leases %+v", out.granted, out.next.Leases)
		}
	})
	t.Run("take over a job's lease whatever the limit", func(t *testing.T) {
		b := board{Limit: 2, Leases: map[string]lease{"a": leased("w1", later), "b": leased("", later)}}
		i := in("w2", 2)
		i.take = []string{"b", "c"}
		out := plan(b, i)
		if out.next.Leases["b"].Holder != "w2" || out.next.Leases["c"].Holder != "w2" || len(out.next.Leases) != 3 {
			t.Fatalf("leases %+v", out.next.Leases)
		}
	})
	t.Run("a kept lease taken over by another worker is lost", func(t *testing.T) {
		b := board{Leases: map[string]lease{"a": leased("w2", later)}}
		i := in("w1", 2)
		i.keep["a"] = true
		out := plan(b, i)
		if !slices.Equal(out.lost, []string{"a"}) || out.next.Leases["a"].Holder != "w2" {
			t.Fatalf("lost %v leases %+v", out.lost, out.next.Leases)
		}
	})
	t.Run("a kept lease that expired is put back whatever the limit", func(t *testing.T) {
		b := board{Leases: map[string]lease{"x": leased("w2", later), "y": leased("w2", later)}}
		i := in("w1", 2)
		i.keep["a"] = true
		out := plan(b, i)
		if out.next.Leases["a"].Holder != "w1" || len(out.next.Leases) != 3 {
			t.Fatalf("leases %+v", out.next.Leases)
		}
	})
}

func TestPlanHandBack(t *testing.T) {
	t.Parallel()
	t.Run("renews a kept lease only past half its life", func(t *testing.T) {
		b := board{Limit: 2, Grace: 120000, Leases: map[string]lease{"a": leased("w1", t0.Add(40*time.Second))}}
		i := in("w1", 2)
		i.keep["a"] = true
		if out := plan(b, i); out.changed {
			t.Fatalf("a fresh lease was rewritten: %+v", out.next)
		}
		b.Leases["a"] = leased("w1", t0.Add(20*time.Second))
		if out := plan(b, i); !out.changed || out.next.Leases["a"].Exp != later.UnixMilli() {
			t.Fatalf("an old lease was not renewed: %+v", out.next)
		}
	})
	t.Run("a lease handed back for a retry counts until a lease life past the retry", func(t *testing.T) {
		i := in("w1", 2)
		// a's task ended; b's runs upstream, and its job is retried in
		// five minutes.
		i.drop = []string{"a"}
		i.handBack = map[string]int64{"b": t0.Add(6 * time.Minute).UnixMilli()}
		out := plan(full, i)
		if l := out.next.Leases["b"]; l.Holder != "" || l.Exp != t0.Add(6*time.Minute).UnixMilli() {
			t.Fatalf("handed back: %+v", out.next.Leases)
		}
		// Four minutes on, it still counts: no new task takes its place.
		w := in("w2", 2)
		w.now = t0.Add(4 * time.Minute)
		w.want = []string{"j1", "j2"}
		later := plan(out.next, w)
		if !slices.Equal(later.granted, []string{"j1"}) || later.next.handedBack() != 1 {
			t.Fatalf("4 minutes on: granted %v leases %+v", later.granted, later.next.Leases)
		}
		// The retry's delivery takes it over, without a new place.
		tk := in("w2", 2)
		tk.now = t0.Add(5 * time.Minute)
		tk.take = []string{"b"}
		taken := plan(later.next, tk)
		if taken.next.Leases["b"].Holder != "w2" || len(taken.next.Leases) != 2 || len(taken.putBack) != 0 {
			t.Fatalf("taken over: %+v put back %v", taken.next.Leases, taken.putBack)
		}
	})
}

func TestPlanFairShareAndRecognition(t *testing.T) {
	t.Parallel()
	t.Run("release and hand back", func(t *testing.T) {
		i := in("w1", 2)
		i.drop = []string{"a"}
		i.handBack = map[string]int64{"b": 0}
		out := plan(full, i)
		if _, ok := out.next.Leases["a"]; ok || out.next.Leases["b"].Holder != "" || out.next.handedBack() != 1 {
			t.Fatalf("leases %+v", out.next.Leases)
		}
		// Another worker's lease is not dropped.
		i = in("w2", 2)
		i.drop = []string{"a"}
		if out := plan(full, i); out.changed {
			t.Fatalf("w2 dropped w1's lease: %+v", out.next)
		}
	})
	t.Run("a fair share while another worker waits", func(t *testing.T) {
		b := board{Limit: 4, Waiting: map[string]waiter{"w2": {Jobs: 1, Exp: later.UnixMilli()}},
			Leases: map[string]lease{"a": leased("w1", later), "b": leased("w1", later)}}
		i := in("w1", 4)
		i.want = []string{"j1", "j2"}
		if out := plan(b, i); len(out.granted) != 0 {
			t.Fatalf("w1 holds its fair share (2 of 4) yet was granted %v", out.granted)
		}
		i = in("w2", 4)
		i.want = []string{"j1", "j2", "j3"}
		out := plan(b, i)
		if len(out.granted) != 2 || out.next.Waiting["w2"].Jobs != 1 {
			t.Fatalf("w2 granted %v waiting %+v", out.granted, out.next.Waiting)
		}
	})
	t.Run("a lease handed back is no worker's and does not shrink the fair share", func(t *testing.T) {
		// w1 and w2 are the workers: a fair share is 3 of 6, however many
		// leases wait, handed back, for their jobs' next deliveries.
		b := board{Limit: 6, Waiting: map[string]waiter{"w2": {Jobs: 1, Exp: later.UnixMilli()}},
			Leases: map[string]lease{"a": leased("w1", later), "b": leased("", later)}}
		i := in("w1", 6)
		i.want = []string{"j1", "j2", "j3"}
		if out := plan(b, i); len(out.granted) != 2 {
			t.Fatalf("w1 holding 1 of a fair 3 was granted %v, want 2", out.granted)
		}
		if got := fairShare(b, "w1", 6); got != 3 {
			t.Fatalf("fairShare = %d, want 3", got)
		}
		if got := fairShare(board{Leases: b.Leases}, "w1", 6); got != 6 {
			t.Fatalf("fairShare with nobody else waiting = %d, want the limit", got)
		}
	})
	t.Run("a write that landed is recognised when planned again", func(t *testing.T) {
		i := in("w1", 2)
		i.want = []string{"j1"}
		first := plan(board{}, i)
		again := plan(first.next, i)
		if again.changed || !slices.Equal(again.granted, []string{"j1"}) {
			t.Fatalf("planned again on its own write: changed %v granted %v", again.changed, again.granted)
		}
	})
}

func TestPlanGone(t *testing.T) {
	t.Parallel()
	// w2 died holding a and b, waiting for more; w1 holds c.
	dead := board{Limit: 5, Grace: 120000,
		Waiting: map[string]waiter{"w2": {Jobs: 3, Exp: later.UnixMilli()}, "w1": {Jobs: 1, Exp: later.UnixMilli()}},
		Leases: map[string]lease{
			"a": {Holder: "w2", Exp: t0.Add(40 * time.Second).UnixMilli(), Reply: "$JS.ACK.a", Inst: "life-1", Kind: "video"},
			"b": {Holder: "w2", Exp: t0.Add(20 * time.Second).UnixMilli(), Reply: "$JS.ACK.b", Inst: "life-1"},
			// w2's new life, started since, holds e.
			"e": {Holder: "w2", Exp: later.UnixMilli(), Reply: "$JS.ACK.e", Inst: "life-2"},
			"c": {Holder: "w1", Exp: later.UnixMilli(), Reply: "$JS.ACK.c"},
		}}
	t.Run("hands a dead holder's leases back and drops its waiting entry", func(t *testing.T) {
		i := in("w1", 4)
		i.keep["c"] = true
		i.reply = map[string]string{"c": "$JS.ACK.c"}
		i.gone = []life{{"w2", "life-1"}}
		out := plan(dead, i)
		if !out.changed || len(out.handedOver) != 2 || out.handedOver["a"].Reply != "$JS.ACK.a" || out.handedOver["b"].Holder != "w2" {
			t.Fatalf("changed %v, handed over %+v", out.changed, out.handedOver)
		}
		for _, id := range []string{"a", "b"} {
			// Counted, no worker's, a lease life past now: the job's
			// next delivery is due at once.
			if l := out.next.Leases[id]; l.Holder != "" || l.Exp != later.UnixMilli() || l.Reply != "" {
				t.Errorf("lease %s after the hand-over: %+v", id, l)
			}
		}
		// Kept for a's kind: a speech job may not be pulled on it; b,
		// written before kinds were, counts for any kind.
		if l := out.next.Leases["a"]; l.Kind != "video" {
			t.Errorf("lease a handed over without its kind: %+v", l)
		}
		now := t0.UnixMilli()
		if v, s := out.next.handedBackFor("video", now, time.Minute), out.next.handedBackFor("speech", now, time.Minute); v != 2 || s != 1 {
			t.Errorf("handed back for video %d, for speech %d; want 2 and 1", v, s)
		}
		if _, ok := out.next.Waiting["w2"]; ok || out.next.handedBack() != 2 || out.next.held("w1") != 1 || out.next.Leases["e"].Holder != "w2" {
			t.Errorf("board after the hand-over: %+v", out.next)
		}
		// w2's dead life no longer waits: w1 alone may take the limit.
		if got := fairShare(out.next, "w1", 4); got != 4 {
			t.Errorf("fair share after the hand-over = %d, want 4", got)
		}
		// Planned again on its own write, it hands nothing over twice.
		if again := plan(out.next, i); len(again.handedOver) != 0 || again.changed {
			t.Errorf("planned again: changed %v, handed over %+v", again.changed, again.handedOver)
		}
		// The next delivery of a takes its lease over.
		take := in("w1", 4)
		take.take, take.reply = []string{"a"}, map[string]string{"a": "$JS.ACK.a2"}
		if l := plan(out.next, take).next.Leases["a"]; l.Holder != "w1" || l.Reply != "$JS.ACK.a2" {
			t.Errorf("lease a taken over: %+v", l)
		}
	})
	t.Run("a lease renewed with a new reply is written again", func(t *testing.T) {
		i := in("w1", 4)
		i.keep["c"] = true
		i.reply = map[string]string{"c": "$JS.ACK.c2"}
		if out := plan(dead, i); !out.changed || out.next.Leases["c"].Reply != "$JS.ACK.c2" {
			t.Errorf("changed %v, lease c %+v", out.changed, out.next.Leases["c"])
		}
	})
	t.Run("a worker not announced writes no reply", func(t *testing.T) {
		i := in("w3", 4)
		i.want = []string{"d"}
		if l := plan(board{}, i).next.Leases["d"]; l.Holder != "w3" || l.Reply != "" {
			t.Errorf("lease d: %+v", l)
		}
	})
}
