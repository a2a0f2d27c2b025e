package quota

import (
	"fmt"
	"testing"
	"time"
)

// busy is a board of limit n with n leases of w1 in use.
func busy(n int) board {
	bd := board{Limit: n, Grace: 120000, Leases: map[string]lease{}}
	for i := range n {
		bd.Leases[fmt.Sprintf("j%d", i)] = leased("w1", later)
	}
	return bd
}

// conflicted is i with the submits of n jobs (j0, j1, ...: busy's)
// refused at at.
func conflicted(i intent, n int, at time.Time) intent {
	i.conflicts, i.now = nil, at
	for k := range n {
		i.conflicts = append(i.conflicts, conflict{job: fmt.Sprintf("j%d", k)})
	}
	return i
}

func TestPlanConflictCutsTheEffectiveLimit(t *testing.T) {
	t.Parallel()
	t.Run("a burst of conflicts cuts once per window, from the leases in use", func(t *testing.T) {
		out := plan(busy(20), conflicted(in("w1", 20), 1, t0))
		if got := out.next.effective(20); got != 15 || !out.changed {
			t.Fatalf("effective %d (changed %v), want 15: three quarters of the 20 in use", got, out.changed)
		}
		again := plan(out.next, conflicted(in("w2", 20), 3, t0.Add(defaultAIMD.Window/2)))
		if got := again.next.effective(20); got != 15 {
			t.Fatalf("effective %d after more conflicts of the same over-commit, want 15 still", got)
		}
		next := plan(again.next, conflicted(in("w2", 20), 1, t0.Add(defaultAIMD.Window)))
		if got := next.next.effective(20); got != 11 {
			t.Fatalf("effective %d after a conflict past the window, want 11", got)
		}
	})
	t.Run("a refused submit granted before the last cut is of the cut's over-commit", func(t *testing.T) {
		// Twenty leases granted at once, their submits spread past the
		// window (a fleet rate, a slow presign): the late refusals are of
		// the over-commit the first one cut for, and cut no more.
		out := plan(busy(20), conflicted(in("w1", 20), 1, t0))
		late := conflicted(in("w1", 20), 1, t0.Add(2*defaultAIMD.Window))
		late.conflicts[0].job, late.conflicts[0].granted = "j5", t0.Add(-time.Second).UnixMilli()
		again := plan(out.next, late)
		if got := again.next.effective(20); got != 15 {
			t.Fatalf("effective %d after a late refusal of a lease granted before the cut, want 15 still", got)
		}
		if again.next.CutAt != t0.UnixMilli() {
			t.Errorf("cut at %d, want the first cut's %d", again.next.CutAt, t0.UnixMilli())
		}
		// One granted after the cut, refused, is a new over-commit.
		fresh := conflicted(in("w1", 20), 1, t0.Add(2*defaultAIMD.Window))
		fresh.conflicts[0].job, fresh.conflicts[0].granted = "j6", t0.Add(time.Second).UnixMilli()
		if got := plan(out.next, fresh).next.effective(20); got != 11 {
			t.Fatalf("effective %d after a refusal of a lease granted after the cut, want 11", got)
		}
	})
	t.Run("the refused submits' leases bound it: they hold no task upstream", func(t *testing.T) {
		out := plan(busy(20), conflicted(in("w1", 20), 12, t0))
		if got := out.next.effective(20); got != 8 {
			t.Fatalf("effective %d after 12 refused of 20 in use, want 8", got)
		}
		bd := busy(12)
		bd.pace = pace{Effective: 15, Ceiling: 20, CutAt: t0.UnixMilli(), QuietAt: t0.UnixMilli()}
		again := plan(bd, conflicted(in("w2", 20), 2, t0.Add(defaultAIMD.Window/2)))
		if got := again.next.effective(20); got != 10 {
			t.Fatalf("effective %d after 2 refused of 12 in use within the window, want 10", got)
		}
	})
	t.Run("planned again after its releases landed, the bound holds", func(t *testing.T) {
		// A write whose answer was lost is planned again on the board
		// that carries it: the refused jobs' leases are gone already.
		i := conflicted(in("w1", 20), 12, t0)
		for _, c := range i.conflicts {
			i.drop = append(i.drop, c.job)
		}
		out := plan(busy(20), i)
		i.now = t0.Add(100 * time.Millisecond)
		again := plan(out.next, i)
		if got := again.next.effective(20); got != 8 {
			t.Fatalf("effective %d planned again, want 8 still", got)
		}
	})
	t.Run("the cut starts from the leases in use when fewer than the limit", func(t *testing.T) {
		bd := busy(9)
		out := plan(bd, conflicted(in("w1", 20), 1, t0))
		if got := out.next.effective(20); got != 6 {
			t.Fatalf("effective %d, want 6: three quarters of the 9 in use", got)
		}
	})
	t.Run("never below one", func(t *testing.T) {
		out := plan(busy(1), conflicted(in("w1", 5), 1, t0))
		if got := out.next.effective(5); got != 1 {
			t.Fatalf("effective %d, want 1", got)
		}
	})
	t.Run("grants stop at the effective limit", func(t *testing.T) {
		bd := board{Limit: 5, pace: pace{Effective: 2}}
		i := in("w1", 5)
		i.want = []string{"a", "b", "c"}
		out := plan(bd, i)
		if len(out.granted) != 2 || out.next.Waiting["w1"].Jobs != 1 {
			t.Fatalf("granted %v waiting %+v, want 2 granted and 1 waiting", out.granted, out.next.Waiting)
		}
	})
}

// round grants and releases n jobs on bd at at, as a worker's writes do.
func round(bd board, n int, at time.Time) board {
	for k := range n {
		id := fmt.Sprintf("r%d", k)
		i := in("w1", bd.Limit)
		i.now, i.want = at, []string{id}
		bd = plan(bd, i).next
		i = in("w1", bd.Limit)
		i.now, i.drop = at, []string{id}
		bd = plan(bd, i).next
	}
	return bd
}

func TestPlanEffectiveLimitRecovers(t *testing.T) {
	t.Parallel()
	a := defaultAIMD
	bd := plan(busy(10), conflicted(in("w1", 10), 1, t0)).next
	bd.Leases = nil
	if got := bd.effective(10); got != 7 {
		t.Fatalf("effective %d after the cut, want 7", got)
	}
	now := t0
	t.Run("not before a quiet interval with a round of grants", func(t *testing.T) {
		if got := round(bd, 7, now.Add(a.Raise-time.Millisecond)).effective(10); got != 7 {
			t.Fatalf("effective %d before the quiet interval, want 7", got)
		}
		if got := round(bd, 6, now.Add(a.Raise)).effective(10); got != 7 {
			t.Fatalf("effective %d after fewer grants than the limit, want 7", got)
		}
	})
	// One step at a time, below the level the conflict came at (10).
	for want := 8; want <= 9; want++ {
		now = now.Add(a.Raise)
		bd = round(bd, want-1, now)
		if got := bd.effective(10); got != want {
			t.Fatalf("effective %d, want %d: one more per quiet interval", got, want)
		}
	}
	t.Run("to the level a conflict came at only after a long quiet", func(t *testing.T) {
		if got := round(bd, 4*9, now.Add(a.Raise)).effective(10); got != 9 {
			t.Fatalf("effective %d a short quiet later, want 9", got)
		}
	})
	now = now.Add(a.Probe)
	bd = round(bd, 4*9, now)
	if got := bd.effective(10); got != 10 || bd.Effective != 0 {
		t.Fatalf("effective %d (stored %d) after a long quiet, want 10, the configured limit, stored as none", got, bd.Effective)
	}
	t.Run("a failed probe falls back one", func(t *testing.T) {
		p := board{Limit: 10, pace: pace{Effective: 8, Ceiling: 9, QuietAt: t0.UnixMilli(), Granted: 4 * 8}}
		p = round(p, 1, t0.Add(a.Probe))
		if got := p.effective(10); got != 9 {
			t.Fatalf("effective %d after a long quiet, want 9 (the probe)", got)
		}
		p.Leases = busy(9).Leases
		p = plan(p, conflicted(in("w1", 10), 1, t0.Add(a.Probe+time.Second))).next
		if got := p.effective(10); got != 8 || p.Ceiling != 9 {
			t.Fatalf("effective %d ceiling %d after the probe's conflict, want 8 and 9", got, p.Ceiling)
		}
	})
}
