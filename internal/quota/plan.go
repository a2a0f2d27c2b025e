package quota

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// board is the value of a resource's key in the bucket: every lease of
// the fleet (job id to holder and expiry) and the workers waiting for
// one. Expired entries are ignored and pruned by the next writer.
type board struct {
	// Limit is the limit of the worker that wrote last (for display: each
	// worker grants by its own configured limit).
	Limit int `json:"limit"`
	// Grace is how long, in milliseconds, an expired lease keeps counting
	// as handed back (holder "") before it lapses: two lease lives of the
	// worker that wrote last (graceOf).
	Grace   int64             `json:"grace_ms,omitempty"`
	Leases  map[string]lease  `json:"leases,omitempty"`
	Waiting map[string]waiter `json:"waiting,omitempty"`
	// pace is the fleet's effective limit and what paces it (aimd.go).
	pace
	// Writer is the id of the write that stored the board (kvcas), so a
	// worker whose compare-and-set went unanswered can tell its own write
	// when it reads the key again; only its writer compares it.
	Writer string `json:"writer,omitempty"`
}

// lease is one job's hold on one unit of a resource.
type lease struct {
	Holder string `json:"holder"`
	// Exp is the expiry in Unix milliseconds.
	Exp int64 `json:"exp"`
	// Lapsed is when (Unix milliseconds) a worker first wrote the board
	// with this lease past its expiry; 0 until then. The grace runs from
	// there, not from Exp: while the bucket cannot be written (a leader
	// election, a partition) no holder can renew, and a lease must not
	// lapse unseen before its holder had its chance once the bucket is
	// back.
	Lapsed int64 `json:"lapsed,omitempty"`
	// Reply is the ack subject of the job's delivery to Holder, written
	// by a holder that answers on its alive subject (see watch): when it
	// dies, the worker that finds out hands its leases back and Naks this
	// subject, so that the job comes back at once instead of an AckWait
	// after the holder's last heartbeat.
	Reply string `json:"reply,omitempty"`
	// Inst names the holder's process life that wrote the lease (see
	// watch): a restarted worker keeps its name, not its life.
	Inst string `json:"inst,omitempty"`
	// Kind is the job's kind. Handed back, the lease lets only a job of
	// its kind be pulled (handedBackFor): a kind sharing the resource
	// must not spend the place kept for the job's next delivery. Empty on
	// a lease written before kinds were: any kind may pull for it.
	Kind string `json:"kind,omitempty"`
}

// waiter is a worker with jobs waiting for a lease.
type waiter struct {
	Jobs int   `json:"jobs"`
	Exp  int64 `json:"exp"`
}

func decodeBoard(b []byte) (board, error) {
	var bd board
	if len(b) == 0 {
		return bd, nil
	}
	err := json.Unmarshal(b, &bd)
	return bd, err
}

// live returns bd as it stands at now: a lease past its expiry counts as
// handed back (holder "") until Grace after a writer first found it
// expired (Lapsed), since its worker died or could not write, but its
// task may still run upstream until its worker renews it or the job's
// next delivery takes the lease over; past that it is dropped (at once on
// a board without grace), and so are waiters past their expiry.
func (bd board) live(now int64) board {
	out := board{Limit: bd.Limit, Grace: bd.Grace, Writer: bd.Writer, pace: bd.pace}
	for id, l := range bd.Leases {
		if l.Exp <= now {
			if bd.Grace == 0 || l.Lapsed != 0 && l.Lapsed+bd.Grace <= now {
				continue
			}
			l.Holder = ""
		}
		if out.Leases == nil {
			out.Leases = make(map[string]lease)
		}
		out.Leases[id] = l
	}
	for h, w := range bd.Waiting {
		if w.Exp > now {
			if out.Waiting == nil {
				out.Waiting = make(map[string]waiter)
			}
			out.Waiting[h] = w
		}
	}
	return out
}

// held counts holder's leases in bd.
func (bd board) held(holder string) int {
	n := 0
	for _, l := range bd.Leases {
		if l.Holder == holder {
			n++
		}
	}
	return n
}

// handedBack counts the leases handed back with their job (holder "").
func (bd board) handedBack() int { return bd.held("") }

// handedBackFor counts the leases handed back with a job of kind whose
// next delivery is due by now (its lease lives a ttl past it, see
// intent.handBack): the jobs of kind a consumer may pull to take them
// over. One not yet due leaves no place to pull for: the pull would take
// another job, which would then wait in the place kept for this one.
func (bd board) handedBackFor(kind string, now int64, ttl time.Duration) int {
	n := 0
	for _, l := range bd.Leases {
		if l.Holder == "" && (l.Kind == kind || l.Kind == "") && l.Exp-ttl.Milliseconds() <= now {
			n++
		}
	}
	return n
}

// waitingJobs is the number of jobs waiting across the fleet.
func (bd board) waitingJobs() int {
	n := 0
	for _, w := range bd.Waiting {
		n += w.Jobs
	}
	return n
}

// fairShare is how many leases holder may hold of limit on bd: while
// another worker waits, the limit split between the workers that hold or
// wait for a lease (holder among them; a lease handed back is no
// worker's), rounded up; else the whole limit. plan grants by it and
// reserve pulls by it, so a worker pulls no job it would not be granted.
func fairShare(bd board, holder string, limit int) int {
	workers := map[string]bool{holder: true}
	contested := false
	for _, l := range bd.Leases {
		if l.Holder != "" {
			workers[l.Holder] = true
		}
	}
	for h := range bd.Waiting {
		workers[h] = true
		contested = contested || h != holder
	}
	if !contested {
		return limit
	}
	return (limit + len(workers) - 1) / len(workers)
}

// graceOf is the grace of a lease life ttl: two lease lives. An expired
// lease is most often a dead worker's, whose job comes back AckWait (one
// lease life) after its last heartbeat: up to half a lease life after the
// lease expired. The grace leaves that delivery room to be pulled and to
// take the lease over, through a consumer leader's election too, before
// the place is given to a new task.
func graceOf(ttl time.Duration) int64 { return 2 * ttl.Milliseconds() }

// same reports whether a and b hold the same leases, waiters and limit
// (the writer aside).
func same(a, b board) bool {
	return a.Limit == b.Limit && a.Grace == b.Grace && a.pace == b.pace && maps.Equal(a.Leases, b.Leases) && maps.Equal(a.Waiting, b.Waiting)
}

// intent is what one worker wants of a resource's board.
type intent struct {
	holder string
	now    time.Time
	ttl    time.Duration
	limit  int
	// keep are the leases the worker holds and renews; one missing from
	// the board (expired while the worker could not write) is put back
	// whatever the limit: its task is upstream all the same.
	keep map[string]bool
	// take are leases taken over whatever the limit: a redelivered job
	// whose task is already upstream.
	take []string
	// want are the jobs waiting for a lease, first come first.
	want []string
	// drop are leases given back.
	drop []string
	// handBack are leases handed back with their job (a stopping worker, a
	// retry while the task runs upstream), each with the expiry (Unix
	// milliseconds) it needs at least: a lease life past the job's next
	// delivery. They keep counting, holder "", until that delivery takes
	// them over or they lapse.
	handBack map[string]int64
	// starved: the worker would start more jobs than it may; it counts
	// as waiting (with no job held) for the fair share.
	starved bool
	// reply is the ack subject of each held or wanted job's delivery, for
	// a worker that answers on its alive subject; empty otherwise.
	reply map[string]string
	// inst is the worker's process life, written with reply.
	inst string
	// kind is the kind of each held or wanted job.
	kind map[string]string
	// conflicts are the submits upstream refused for too many tasks at
	// once since the worker's last write; aimd paces the effective limit
	// they lower.
	conflicts []conflict
	aimd      AIMD
	// gone are other holders' lives known dead (watch): their leases are
	// handed back, and the waiting entry of a holder gone silent dropped.
	gone []life
}

// lease is job id's lease as the worker writes it, expiring at exp.
func (in intent) lease(id string, exp int64) lease {
	return lease{Holder: in.holder, Exp: exp, Reply: in.reply[id], Inst: in.inst, Kind: in.kind[id]}
}

// outcome is a planned board and what it means for the worker.
type outcome struct {
	next board
	// changed: next must be written.
	changed bool
	// granted are the jobs of want that hold a lease in next.
	granted []string
	// lost are kept leases another holder now has (the job was
	// redelivered to another worker, which took its lease over).
	lost []string
	// putBack are leases of take and keep that were not on the board (they
	// had lapsed, or another delivery gave them back) and were put back
	// whatever the limit: their task may still run upstream.
	putBack []string
	// handedOver are the leases of gone holders this plan handed back,
	// as they were (the dead holder and its delivery's ack subject).
	handedOver map[string]lease
}

// plan applies in to cur. It is a pure function, and idempotent: planned
// again on a board that already carries its effects (a write whose answer
// was lost but that was applied) it changes nothing and reports the same
// grants, which is how a worker recognises its own write.
func plan(cur board, in intent) outcome {
	now := in.now.UnixMilli()
	next := cur.live(now)
	if next.Leases == nil {
		next.Leases = make(map[string]lease)
	}
	if next.Waiting == nil {
		next.Waiting = make(map[string]waiter)
	}
	next.Limit, next.Grace = in.limit, graceOf(in.ttl)
	// An expired lease starts its grace with the first write that sees it.
	for id, l := range next.Leases {
		if l.Exp <= now && l.Lapsed == 0 {
			l.Lapsed = now
			next.Leases[id] = l
		}
	}
	var out outcome
	planLimit(&next, in)
	planGone(next, in, &out)
	planHeld(next, in, &out)
	planWanted(&next, in, &out)
	if len(next.Leases) == 0 {
		next.Leases = nil
	}
	if len(next.Waiting) == 0 {
		next.Waiting = nil
	}
	out.next = next
	out.changed = !same(cur, next)
	return out
}

// planGone hands back the leases of the holders known dead, as their
// worker would have on stopping: each counts until the job's next
// delivery, due at once (the watch Naks it), takes it over, or a lease
// life and a grace pass. Their waiting entries go, so that the fair share
// is split between the living.
func planGone(next board, in intent, out *outcome) {
	if len(in.gone) == 0 {
		return
	}
	exp := in.now.Add(in.ttl).UnixMilli()
	for id, l := range next.Leases {
		if l.Holder == "" || !slices.Contains(in.gone, life{l.Holder, l.Inst}) {
			continue
		}
		next.Leases[id] = lease{Exp: max(l.Exp, exp), Kind: l.Kind}
		if out.handedOver == nil {
			out.handedOver = map[string]lease{}
		}
		out.handedOver[id] = l
	}
	for _, g := range in.gone {
		// A new life under the name that waits writes its entry again
		// within pollEvery.
		delete(next.Waiting, g.holder)
	}
}

// planHeld applies to next the worker's changes to the leases it holds:
// releases, hand-backs, takeovers and renewals.
func planHeld(next board, in intent, out *outcome) {
	now, exp := in.now.UnixMilli(), in.now.Add(in.ttl).UnixMilli()
	// A lease of the worker past half its life is renewed; one fresher is
	// left as it is, so a worker writes about twice per ttl when nothing
	// else changes.
	fresh := func(id string, l lease) bool {
		return l.Holder == in.holder && l.Exp-now > in.ttl.Milliseconds()/2 && l == in.lease(id, l.Exp)
	}

	for _, id := range in.drop {
		if l, ok := next.Leases[id]; ok && l.Holder == in.holder {
			delete(next.Leases, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(in.handBack)) {
		if l, ok := next.Leases[id]; ok && l.Holder == in.holder {
			next.Leases[id] = lease{Exp: max(l.Exp, in.handBack[id]), Kind: l.Kind}
		}
	}
	for _, id := range in.take {
		if l, ok := next.Leases[id]; !ok || !fresh(id, l) {
			if !ok {
				out.putBack = append(out.putBack, id)
			}
			next.Leases[id] = in.lease(id, exp)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(in.keep)) {
		l, ok := next.Leases[id]
		switch {
		case ok && l.Holder != in.holder && l.Holder != "":
			out.lost = append(out.lost, id)
		case !ok || !fresh(id, l):
			if !ok {
				out.putBack = append(out.putBack, id)
			}
			next.Leases[id] = in.lease(id, exp)
		}
	}
}

// planWanted grants the worker's waiting jobs what next and the fair
// share allow, and registers the worker as waiting for the rest.
func planWanted(next *board, in intent, out *outcome) {
	now, exp := in.now.UnixMilli(), in.now.Add(in.ttl).UnixMilli()
	// Jobs of want already leased to this worker (by a write whose answer
	// was lost) or handed back (a stopped or dead worker's delivery of the
	// same job) are granted first, outside the count: their lease is in it
	// already. One another worker holds is left to it: a delivery of the
	// same job there may be submitting, and this one, once granted, could
	// give back the place that delivery's task counts in. It waits until
	// that worker gives the lease back or it lapses.
	var rest []string
	held := 0
	for _, id := range in.want {
		l, ok := next.Leases[id]
		switch {
		case ok && (l.Holder == in.holder || l.Holder == ""):
			next.Leases[id] = in.lease(id, exp)
			out.granted = append(out.granted, id)
		case ok:
			held++
		default:
			rest = append(rest, id)
		}
	}
	limit := next.effective(in.limit)
	free := limit - len(next.Leases)
	if free > 0 && len(rest) > 0 {
		allow := min(free, max(0, fairShare(*next, in.holder, limit)-next.held(in.holder)))
		n := min(allow, len(rest))
		for _, id := range rest[:n] {
			next.Leases[id] = in.lease(id, exp)
			out.granted = append(out.granted, id)
		}
		next.countGrants(n)
		rest = rest[n:]
	}
	if waiting := len(rest) + held; waiting > 0 || in.starved {
		if w, ok := next.Waiting[in.holder]; !ok || w.Jobs != waiting || w.Exp-now <= in.ttl.Milliseconds()/2 {
			next.Waiting[in.holder] = waiter{Jobs: waiting, Exp: exp}
		}
	} else {
		delete(next.Waiting, in.holder)
	}
}
