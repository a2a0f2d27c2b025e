package quota

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/kvcas"
	"github.com/sluice-dev/sluice/internal/natsconn"
)

// pollEvery is how often a worker reads the board while jobs of its own
// wait for a lease or its consumer would start more than it may.
const pollEvery = 250 * time.Millisecond

// idleSync is how often a worker reads the board otherwise, so that its
// view (the consumer's gate, the metrics) stays recent.
const idleSync = 2 * time.Second

// leases keeps one worker's leases of one resource on the fleet's board:
// one goroutine (run) reads the key, plans the change the worker's
// requests make (plan) and writes it by compare-and-set, again until it
// lands. Requests (acquire, take, release, hand back) never write
// themselves, so a worker is one writer per resource however many jobs it
// runs.
type leases struct {
	resource string
	key      string
	limit    int
	aimd     AIMD
	holder   string
	ttl      time.Duration
	doc      *kvcas.Doc[board]
	log      zerolog.Logger
	clock    *natsconn.Clock
	observe  func(Status)
	wake     chan struct{}

	mu sync.Mutex
	// refs counts the Leases of each job this worker holds or takes over:
	// two deliveries of one job on one worker share its lease, which is
	// given back when the last of them lets go.
	refs     map[string]int
	keep     map[string]bool
	take     map[string]bool
	drop     map[string]bool
	handBack map[string]time.Time
	want     []*request
	starved  time.Time
	// drained: the consumer's last pull got fewer jobs than it was
	// allowed, so the stream had no more; a worker asking for more than
	// it may is starved only when it has not (else an idle worker would
	// hold the others to their fair share).
	drained bool
	// reserved are the jobs the consumer pulled on this worker's word
	// (reserve) that have not asked for a lease yet.
	reserved []reservation
	// view is the board as last read or written, live at viewAt.
	view   board
	viewAt time.Time
	// replies are the ack subjects of the deliveries of the jobs this
	// worker holds or wants a lease for; its leases carry them once it is
	// announced (its alive subject answers, see watch).
	replies   map[string]string
	announced bool
	// kinds are the kinds of the jobs this worker holds or wants a lease
	// for, which their leases carry.
	kinds map[string]string
	// inst is this process's life (watch), which its leases carry once
	// announced.
	inst string
	// gone are the dead holders whose leases the next write hands back;
	// handedOver hears what that write handed over.
	gone       map[life]bool
	handedOver func(resource string, handed map[string]lease)
	// conflicts are the submits upstream refused for too many tasks at
	// once since the last write of the board (see aimd).
	conflicts []conflict
	// granted is when (Unix milliseconds, the boards' clock) each job of
	// keep was granted its lease, which its conflict carries.
	granted map[string]int64
	// changed is closed, and replaced, whenever the view changes: a
	// consumer the quota held back asks again at once (Fleet.Changed).
	changed chan struct{}
}

// reservation is one job the consumer may pull: of kind, until its
// deadline, on a handed-back lease of kind (back) or on a free place.
type reservation struct {
	kind  string
	until time.Time
	back  bool
}

// request is one job waiting for a lease.
type request struct {
	job     string
	granted chan struct{}
}

func newLeases(resource string, limit int, cfg Config) *leases {
	log := cfg.Logger.With().Str("quota", resource).Logger()
	return &leases{
		resource: resource, key: "leases." + resource, limit: limit, aimd: cfg.AIMD.withDefaults(), holder: cfg.Holder, ttl: cfg.TTL,
		doc: boardDoc(cfg, cfg.TTL, log), log: log, clock: cfg.Clock, observe: cfg.Observe,
		wake: make(chan struct{}, 1),
		refs: map[string]int{}, keep: map[string]bool{}, take: map[string]bool{}, drop: map[string]bool{}, handBack: map[string]time.Time{},
		replies: map[string]string{}, kinds: map[string]string{}, gone: map[life]bool{}, granted: map[string]int64{}, changed: make(chan struct{}),
	}
}

func (l *leases) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// acquire waits until job, of kind, delivered with reply, holds a lease,
// or ctx ends.
func (l *leases) acquire(ctx context.Context, kind, job, reply string) error {
	req := &request{job: job, granted: make(chan struct{})}
	l.mu.Lock()
	l.setReply(kind, job, reply)
	if l.keep[job] {
		l.refs[job]++
		l.mu.Unlock()
		return nil
	}
	l.unreserveLocked(kind)
	l.want = append(l.want, req)
	l.mu.Unlock()
	l.poke()
	select {
	case <-req.granted:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	if slices.Contains(l.want, req) {
		l.want = slices.DeleteFunc(l.want, func(r *request) bool { return r == req })
		l.mu.Unlock()
	} else {
		// Granted as the wait ended: give it back.
		l.mu.Unlock()
		l.release(job, false, 0)
	}
	l.poke()
	return ctx.Err()
}

// setReply keeps job's kind and the ack subject of its latest delivery on
// this worker.
func (l *leases) setReply(kind, job, reply string) {
	l.kinds[job] = kind
	if reply = ackSubject(reply); reply != "" {
		l.replies[job] = reply
	}
}

// takeOver makes job's lease this worker's, whatever the limit.
func (l *leases) takeOver(kind, job, reply string) {
	l.mu.Lock()
	l.setReply(kind, job, reply)
	l.unreserveLocked(kind)
	l.refs[job]++
	delete(l.drop, job)
	delete(l.handBack, job)
	if !l.keep[job] {
		l.take[job] = true
	}
	l.mu.Unlock()
	l.poke()
}

// release gives job's lease back; handBack leaves it counting for the
// job's next delivery, due in redeliverIn (see intent.handBack).
func (l *leases) release(job string, handBack bool, redeliverIn time.Duration) {
	l.mu.Lock()
	if l.refs[job]--; l.refs[job] > 0 {
		// Another delivery of the job on this worker holds it still.
		l.mu.Unlock()
		return
	}
	delete(l.refs, job)
	delete(l.keep, job)
	delete(l.take, job)
	delete(l.replies, job)
	delete(l.kinds, job)
	delete(l.granted, job)
	if handBack {
		l.handBack[job] = l.clock.Now().Add(max(redeliverIn, 0))
	} else {
		l.drop[job] = true
	}
	l.mu.Unlock()
	l.poke()
}

// unreserve drops n reservations of kind the consumer's pull did not
// use; pulled tells whether it was a pull's leftover, which says whether
// the stream ran dry (see drained).
func (l *leases) unreserve(kind string, n int, pulled bool) {
	l.mu.Lock()
	for range n {
		l.unreserveLocked(kind)
	}
	if pulled {
		l.drained = n > 0
	}
	l.mu.Unlock()
}

// unreserveLocked drops one reservation of kind, one on a free place
// first: a job that asks for its lease and is not the handed-back one
// leaves the handed-back place to that job's delivery.
func (l *leases) unreserveLocked(kind string) {
	i := slices.IndexFunc(l.reserved, func(r reservation) bool { return r.kind == kind && !r.back })
	if i < 0 {
		i = slices.IndexFunc(l.reserved, func(r reservation) bool { return r.kind == kind })
	}
	if i >= 0 {
		l.reserved = slices.Delete(l.reserved, i, i+1)
	}
}

// reserve returns how many of n jobs of kind the consumer may pull now,
// and holds that many places until the jobs ask for their lease (or a ttl
// passes).
func (l *leases) reserve(kind string, n int) int {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved = slices.DeleteFunc(l.reserved, func(r reservation) bool { return !r.until.After(now) })
	if l.viewAt.IsZero() {
		// The board has not been read yet: a worker that joins a full
		// fleet must not pull a burst of jobs it cannot start.
		defer l.poke()
		return 0
	}
	v := l.view.live(now.UnixMilli())
	limit := v.effective(l.limit)
	free := min(limit-len(v.Leases), fairShare(v, l.holder, limit)-v.held(l.holder))
	// A job handed back counts until its next delivery takes its lease
	// over: that delivery must be pulled whatever the limit, and only it.
	// Its place is no other job's: not another kind's (handedBackFor),
	// not a job already waiting for a free place (want counts against
	// free only).
	back := max(v.handedBackFor(kind, now.UnixMilli(), l.ttl)-l.reservedFor(kind, true), 0)
	shared := max(free-len(l.want)-l.reservedFor("", false), 0)
	allow := min(back+shared, n)
	if allow < n || now.Sub(l.viewAt) > pollEvery {
		// Read the board again soon: it may have moved since.
		defer l.poke()
	}
	if allow < n && !l.drained {
		l.starved = now
	} else {
		l.starved = time.Time{}
	}
	for i := range allow {
		l.reserved = append(l.reserved, reservation{kind: kind, until: now.Add(l.ttl), back: i < back})
	}
	return allow
}

// reservedFor counts the reservations on handed-back leases of kind
// (back), or on free places of any kind.
func (l *leases) reservedFor(kind string, back bool) int {
	n := 0
	for _, r := range l.reserved {
		if r.back == back && (!back || r.kind == kind) {
			n++
		}
	}
	return n
}

// run keeps the board in step with the worker's requests until ctx ends,
// then writes once more so that a stopping worker's handed-back leases
// and releases land.
func (l *leases) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			l.sync(fctx)
			cancel()
			return
		case <-l.wake:
		case <-t.C:
		}
		l.sync(ctx)
		t.Reset(l.nextSync())
	}
}

// nextSync is when the board must be read again: soon while jobs wait or
// the consumer is starved, else every idleSync, and within a quarter of
// the lease life (a lease is renewed past half of it).
func (l *leases) nextSync() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.want) > 0 || !l.starved.IsZero() && l.clock.Now().Sub(l.starved) < 2*time.Second {
		return pollEvery
	}
	return min(l.ttl/4, idleSync)
}

// intent snapshots the worker's requests.
func (l *leases) intent() intent {
	l.mu.Lock()
	defer l.mu.Unlock()
	in := intent{
		holder: l.holder, now: l.clock.Now(), ttl: l.ttl, limit: l.limit, aimd: l.aimd, conflicts: slices.Clone(l.conflicts),
		keep: make(map[string]bool, len(l.keep)),
		take: keys(l.take), drop: keys(l.drop), handBack: make(map[string]int64, len(l.handBack)),
	}
	for id, due := range l.handBack {
		in.handBack[id] = due.Add(l.ttl).UnixMilli()
	}
	in.starved = !l.starved.IsZero() && in.now.Sub(l.starved) < 2*time.Second
	for id := range l.keep {
		in.keep[id] = true
	}
	for _, r := range l.want {
		in.want = append(in.want, r.job)
	}
	if l.announced {
		in.reply, in.inst = maps.Clone(l.replies), l.inst
	}
	in.kind = maps.Clone(l.kinds)
	for g := range l.gone {
		in.gone = append(in.gone, g)
	}
	return in
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sync reads the board, plans the worker's requests on it and writes the
// result by compare-and-set (kvcas), again until it lands or ctx ends.
func (l *leases) sync(ctx context.Context) {
	// Retries come at least every quarter of a lease life, so that once the
	// bucket answers again a worker renews its leases well within the grace
	// the others give them (see board.live).
	retry := backoff.Retry{Spacing: backoff.Exponential{Min: 50 * time.Millisecond, Max: min(2*time.Second, l.ttl/4)}}
	began, warned := time.Now(), false
	_ = retry.Do(ctx, func(ctx context.Context, attempt int) error {
		err := l.syncOnce(ctx)
		if err == nil {
			if warned {
				l.log.Info().Dur("after", time.Since(began).Round(time.Millisecond)).Int("attempts", attempt+1).
					Msg("quota board written again")
			}
			return nil
		}
		if !errors.Is(err, kvcas.ErrConflict) {
			l.log.Debug().Err(err).Msg("quota board not written; reading it again")
		}
		// A board this worker cannot write for a lease life holds its
		// waiting jobs and lets its leases lapse for the others: say so
		// once (a conflict is another writer's change, or a read from a
		// replica behind the last write).
		if !warned && time.Since(began) >= l.ttl {
			warned = true
			l.log.Warn().Err(err).Int("attempts", attempt+1).Int("waiting_here", l.status().WaitingHere).
				Msg("quota board not written for a lease life: this worker's jobs waiting for a lease wait on, and its leases lapse for the other workers until it writes again")
		}
		return err
	})
}

// syncOnce plans the worker's requests on the board and writes the plan.
// plan is idempotent, so a write whose answer was lost and that kvcas did
// not recognise (its LostFor passed) changes nothing when planned again.
func (l *leases) syncOnce(ctx context.Context) error {
	if err := l.clock.Sync(ctx); err != nil {
		return err
	}
	in := l.intent()
	var out outcome
	_, err := l.doc.Update(ctx, l.key, nil, func(cur board, _ bool) (board, error) {
		out = plan(cur, in)
		// A release, hand-back or takeover that changes nothing may have
		// been planned on a stale read: on a cluster a read can come from
		// a replica that has not applied the last write yet, and a lease
		// it does not show would stay on the board for good. It is written
		// all the same: the compare-and-set fails on a stale revision.
		if !out.changed && len(in.drop)+len(in.handBack)+len(in.take)+len(in.gone) == 0 {
			return cur, kvcas.Unchanged
		}
		return out.next, nil
	})
	if err != nil {
		return err
	}
	l.apply(in, out)
	return nil
}

// boardDoc is how a worker reads and writes a resource's board.
func boardDoc(cfg Config, ttl time.Duration, log zerolog.Logger) *kvcas.Doc[board] {
	return kvcas.New(kvcas.Doc[board]{
		KV: cfg.KV, Conn: cfg.Conn, Name: "quota",
		WriteID: func(bd *board) *string { return &bd.Writer },
		Decode: func(b []byte) (board, error) {
			bd, err := decodeBoard(b)
			if err != nil {
				// A board nobody can read is replaced: its leases lapse.
				log.Warn().Err(err).Msg("quota board unreadable; starting it afresh")
				return board{}, nil
			}
			return bd, nil
		},
		LostSpacing: backoff.Exponential{Min: 50 * time.Millisecond, Max: min(2*time.Second, ttl/4)},
		Count:       cfg.Count,
	})
}

// apply records a board that holds in's effects.
func (l *leases) apply(in intent, out outcome) {
	l.mu.Lock()
	for _, id := range in.take {
		if l.take[id] {
			delete(l.take, id)
			l.keep[id] = true
		}
	}
	for _, id := range in.drop {
		delete(l.drop, id)
	}
	for id := range in.handBack {
		delete(l.handBack, id)
	}
	for _, g := range in.gone {
		delete(l.gone, g)
	}
	l.conflicts = l.conflicts[len(in.conflicts):]
	for _, id := range out.lost {
		delete(l.keep, id)
	}
	granted := make(map[string]bool, len(out.granted))
	for _, id := range out.granted {
		granted[id] = true
	}
	var grants []*request
	l.want = slices.DeleteFunc(l.want, func(r *request) bool {
		if !granted[r.job] {
			return false
		}
		l.keep[r.job] = true
		l.refs[r.job]++
		l.granted[r.job] = in.now.UnixMilli()
		grants = append(grants, r)
		return true
	})
	if !same(l.view, out.next) {
		close(l.changed)
		l.changed = make(chan struct{})
	}
	l.view, l.viewAt = out.next, in.now
	st := l.statusLocked(in.now)
	l.mu.Unlock()
	if len(out.putBack) > 0 {
		// They had lapsed (their worker could not write the board for
		// longer than a lease's life and grace, or their job came back
		// later still) or another delivery of the job gave them back (its
		// task ended: then no harm). A task that still runs went uncounted
		// meanwhile: its place may have gone to a new task.
		l.log.Warn().Strs("jobs", out.putBack).Int("in_use", len(out.next.Leases)).Int("limit", in.limit).
			Msg("leases put back after they had left the board; if their tasks still run upstream, the fleet may be over its quota until they end")
	}
	if len(out.lost) > 0 {
		l.log.Info().Strs("jobs", out.lost).Msg("leases taken over by the workers the jobs were delivered to")
	}
	if len(out.handedOver) > 0 && l.handedOver != nil {
		l.handedOver(l.resource, out.handedOver)
	}
	// Observed before the jobs go on, so the metrics never lag a submit.
	if l.observe != nil {
		l.observe(st)
	}
	for _, r := range grants {
		close(r.granted)
	}
}

func (l *leases) statusLocked(now time.Time) Status {
	v := l.view.live(now.UnixMilli())
	return Status{
		Resource: l.resource, Limit: l.limit, Effective: v.effective(l.limit), InUse: len(v.Leases), Held: v.held(l.holder),
		Waiting: v.waitingJobs(), WaitingHere: len(l.want),
	}
}

// conflict records job's refused submit for the next write of the board.
func (l *leases) conflict(job string) {
	l.mu.Lock()
	l.conflicts = append(l.conflicts, conflict{job: job, granted: l.granted[job]})
	l.mu.Unlock()
	l.poke()
}
