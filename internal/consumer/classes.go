package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/order"
)

// Starts from the class queues (docs/lifecycle.md, "Order of starts").
// While the Policy is enabled, or the sweep saw jobs in a kind's class
// queues, each pull round of the kind reads the class queues' counts
// (one stream info), lets order.Stride allocate its free slots over them,
// and pulls each chosen class with FetchNoWait. Otherwise the round pulls
// the kind's consumer as it always has.

// headTTL is how long a class queue's head publish time is reused: aging
// counts in minutes.
const headTTL = 5 * time.Second

// classQueues is what a kind's fetch loop knows of the kind's class queues;
// only that loop uses it, but for swept.
type classQueues struct {
	kind string
	// swept: the last sweep saw jobs in the kind's class queues.
	swept atomic.Bool
	// base is the kind consumer's configuration, the class consumers'
	// template.
	base      jetstream.ConsumerConfig
	stream    jetstream.Stream
	consumers map[string]jetstream.Consumer // by subject
	heads     map[string]head               // by subject
	stride    order.Stride
	// wait is how long a round that started nothing waits before the
	// next: gateWait (tests stretch it), unless stored wakes it first.
	wait time.Duration
	// stored is signalled (buffer 1) each time this worker's admission has
	// stored a copy in one of the kind's class queues: a job published to
	// an idle worker starts at once, not a wait later. Copies stored by
	// another worker's admission are seen by the wait's poll.
	stored chan struct{}
	// blocked: the last round left jobs waiting that it could not start
	// (their tenant's cap or budget); the loop then waits out q.wait.
	blocked bool
}

type head struct{ published, read time.Time }

// classSet holds every served kind's classQueues.
type classSet struct {
	mu     sync.Mutex
	byKind map[string]*classQueues
}

func (s *classSet) of(kind string) *classQueues {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKind == nil {
		s.byKind = make(map[string]*classQueues)
	}
	q := s.byKind[kind]
	if q == nil {
		q = &classQueues{kind: kind, consumers: make(map[string]jetstream.Consumer), heads: make(map[string]head),
			wait: gateWait, stored: make(chan struct{}, 1)}
		s.byKind[kind] = q
	}
	return q
}

// wake tells q's fetch loop that a class queue holds a new copy.
func (q *classQueues) wake() {
	select {
	case q.stored <- struct{}{}:
	default:
	}
}

// idle waits, after a round that started nothing, for q.wait or, unless
// the round was blocked, until this worker's admission stores a copy; it
// returns ctx's error.
func (q *classQueues) idle(ctx context.Context) error {
	t := time.NewTimer(q.wait)
	defer t.Stop()
	stored := q.stored
	if q.blocked {
		stored = nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	case <-stored:
	}
	return nil
}

// fromClasses reports whether this round of q's kind pulls the class
// queues rather than the kind's consumer.
func (c *Consumer) fromClasses(q *classQueues) bool {
	return c.cfg.Policy.Enabled() || q.swept.Load()
}

// classRound is one pull round's view of a kind's class queues: the round
// to allocate and, by class, its subject and its messages delivered and
// not yet acknowledged (running, or handed back and due again).
type classRound struct {
	order.Round
	subjects []string
	unacked  []int
}

// pullClasses allocates free slots over q's class queues and pulls them,
// holding and queueing what arrives; it returns how many arrived.
//
// Jobs handed back come first: a class with unacknowledged jobs and none
// never delivered can give only a job due again (handed back by a
// stopping or dead worker, a retry), whose task may hold its place on the
// fleet's quota; a new job taking that place would wait in it while the
// job it was kept for could not be pulled. Then the free slots are
// allocated: a class that gives fewer than allotted counts as empty for
// the rest of the round and its slots go to the next allocation, so the
// round ends only when every slot is filled or no class has a job to
// give: a round never idles a place while a job it may start waits.
// Slots still free go to the other classes with unacknowledged jobs.
func (c *Consumer) pullClasses(ctx context.Context, q *classQueues, free int, queue chan<- jetstream.Msg) (int, error) {
	q.blocked = false
	round, err := c.classRound(ctx, q)
	if err != nil || len(round.subjects) == 0 {
		return 0, err
	}
	idle := make([]bool, len(round.Classes))
	for i, cl := range round.Classes {
		idle[i] = cl.Waiting == 0
	}
	got, err := c.pullHandedBack(ctx, q, &round, free, queue, idle)
	for err == nil && got < free {
		round.Free = free - got
		takes, allotted := q.stride.Allocate(round.Round), 0
		for i, n := range takes {
			if n == 0 || err != nil {
				continue
			}
			allotted += n
			var k int
			k, err = c.pullClass(ctx, q, round.subjects[i], n, queue)
			got += k
			round.charge(q, c.cfg.Policy, i, k)
			if cl := &round.Classes[i]; k < n {
				cl.Waiting = 0
			} else {
				cl.Waiting -= k
			}
		}
		if allotted == 0 {
			break
		}
	}
	if err != nil {
		return got, err
	}
	for i := range idle {
		idle[i] = !idle[i]
	}
	k, err := c.pullHandedBack(ctx, q, &round, free-got, queue, idle)
	q.blocked = slices.ContainsFunc(round.Classes, func(cl order.Class) bool { return cl.Waiting > 0 })
	return got + k, err
}

// charge counts k starts of class i: the tenant's pass and its room.
func (r *classRound) charge(q *classQueues, p order.Policy, i, k int) {
	t := r.Classes[i].Tenant
	q.stride.Charge(t, p.Weight(t), k)
	if room, capped := r.Room[t]; capped {
		r.Room[t] = room - k
	}
}

// pullHandedBack offers up to free slots to the classes of which (by
// index) with unacknowledged jobs, most urgent first: a job a worker
// handed back (stopping, a retry, an AckWait passed) is due again but is
// not among the jobs its class consumer has never delivered. Its tenant's
// cap already counts it; a tenant waiting for budget starts nothing.
func (c *Consumer) pullHandedBack(ctx context.Context, q *classQueues, r *classRound, free int, queue chan<- jetstream.Msg, which []bool) (int, error) {
	idx := make([]int, 0, len(r.Classes))
	for i, cl := range r.Classes {
		if which[i] && r.unacked[i] > 0 && !r.Spent[cl.Tenant] {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(i, j int) int { return r.Classes[i].Priority - r.Classes[j].Priority })
	got := 0
	for _, i := range idx {
		if got == free {
			break
		}
		k, err := c.pullClass(ctx, q, r.subjects[i], min(free-got, r.unacked[i]), queue)
		got += k
		r.charge(q, c.cfg.Policy, i, k)
		if err != nil {
			return got, err
		}
	}
	return got, nil
}

// classRound reads q's class queues: which hold messages (one stream
// info), and for each its class consumer's counts. A class waits with
// the messages its consumer has not yet delivered, aged from the oldest
// of those; delivered, unacknowledged ones are running or due again,
// and count against the tenant's cap.
func (c *Consumer) classRound(ctx context.Context, q *classQueues) (classRound, error) {
	p := c.cfg.Policy
	if q.stream == nil {
		s, err := c.cfg.JS.Stream(ctx, contract.JobsStream)
		if err != nil {
			return classRound{}, err
		}
		q.stream = s
	}
	info, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(contract.ClassesFilter(q.kind)))
	if err != nil {
		return classRound{}, err
	}
	now := time.Now()
	r := classRound{Round: order.Round{Weight: p.Weight, Room: map[string]int{}, Spent: map[string]bool{}, Aging: c.cfg.PriorityAging, Now: now}}
	unread, lastErr := map[string]bool{}, error(nil)
	for subject, n := range info.State.Subjects {
		cl, ok := contract.ParseClassSubject(subject)
		if !ok || cl.Kind != q.kind || n == 0 {
			continue
		}
		class, unacked, err := c.readClass(ctx, q, subject, now)
		if err != nil {
			// One unreadable class stops no other tenant's starts; its
			// tenant sits the round out, its running jobs uncounted.
			c.log.Warn().Err(err).Str("class", subject).Msg("class queue unreadable: its tenant waits a round")
			unread[cl.Tenant], lastErr = true, err
			continue
		}
		r.subjects, r.unacked = append(r.subjects, subject), append(r.unacked, unacked)
		r.Classes = append(r.Classes, class)
		r.Spent[cl.Tenant] = p.BudgetHolds(cl.Tenant, q.kind)
		if limit := p.MaxTasks(cl.Tenant, q.kind); limit > 0 {
			if _, ok := r.Room[cl.Tenant]; !ok {
				r.Room[cl.Tenant] = limit
			}
			r.Room[cl.Tenant] -= unacked
		}
	}
	if len(r.subjects) == 0 && lastErr != nil {
		return classRound{}, lastErr
	}
	for tenant := range unread {
		r.Spent[tenant] = true
	}
	q.swept.Store(len(r.subjects) > 0)
	for subject := range q.heads {
		if info.State.Subjects[subject] == 0 {
			delete(q.heads, subject)
		}
	}
	return r, nil
}

// readClass reads a class queue's consumer: the class as the round sees
// it, and how many of its messages are delivered and unacknowledged.
func (c *Consumer) readClass(ctx context.Context, q *classQueues, subject string, now time.Time) (order.Class, int, error) {
	cl, _ := contract.ParseClassSubject(subject)
	var info *jetstream.ConsumerInfo
	for range 2 {
		cn, err := c.classConsumer(ctx, q, subject)
		if err != nil {
			return order.Class{}, 0, err
		}
		if info, err = cn.Info(ctx); err == nil {
			break
		}
		// Bound again: a sweep may have deleted it as idle, and a class
		// with jobs has it made again at once.
		delete(q.consumers, subject)
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return order.Class{}, 0, fmt.Errorf("consumer of %s: %w", subject, err)
		}
	}
	if info == nil {
		return order.Class{}, 0, fmt.Errorf("consumer of %s: %w", subject, jetstream.ErrConsumerNotFound)
	}
	class := order.Class{Priority: cl.Priority, Tenant: cl.Tenant, Waiting: int(info.NumPending)}
	if class.Waiting > 0 {
		var err error
		if class.Head, err = q.head(ctx, subject, info.Delivered.Stream+1, now); err != nil {
			return order.Class{}, 0, err
		}
	}
	return class, info.NumAckPending, nil
}

// head returns when the oldest job of a class queue not yet delivered,
// the first at or after sequence from, was published, read at most every
// headTTL.
func (q *classQueues) head(ctx context.Context, subject string, from uint64, now time.Time) (time.Time, error) {
	if h, ok := q.heads[subject]; ok && now.Sub(h.read) < headTTL {
		return h.published, nil
	}
	raw, err := q.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, nil // delivered since the count: no aging this round
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("head of %s: %w", subject, err)
	}
	published := raw.Time
	if t, err := time.Parse(time.RFC3339Nano, raw.Header.Get(contract.HeaderPublished)); err == nil {
		published = t
	}
	q.heads[subject] = head{published: published, read: now}
	return published, nil
}

// pullClass pulls up to n jobs of a class queue, without waiting.
func (c *Consumer) pullClass(ctx context.Context, q *classQueues, subject string, n int, queue chan<- jetstream.Msg) (int, error) {
	cn, err := c.classConsumer(ctx, q, subject)
	if err != nil {
		return 0, err
	}
	got, err := c.pull(q.kind, cn, n, false, queue)
	if err != nil {
		// Bound again next time: the consumer may have been deleted.
		delete(q.consumers, subject)
	}
	return got, err
}

// classConsumer binds a class queue's durable consumer, creating it with
// the kind consumer's settings when it does not exist yet.
func (c *Consumer) classConsumer(ctx context.Context, q *classQueues, subject string) (jetstream.Consumer, error) {
	if cn, ok := q.consumers[subject]; ok {
		return cn, nil
	}
	cl, _ := contract.ParseClassSubject(subject)
	cfg := q.base
	cfg.Name, cfg.Durable = "", contract.ClassConsumerName(cl.Kind, cl.Priority, cl.Tenant)
	cfg.FilterSubject, cfg.FilterSubjects, cfg.Metadata = subject, nil, nil
	cfg.Description = fmt.Sprintf("sluice workers serving %s jobs of priority %d for tenant %s", cl.Kind, cl.Priority, cl.Tenant)
	cn, err := c.cfg.JS.CreateOrUpdateConsumer(ctx, contract.JobsStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("ensure consumer %s: %w", cfg.Durable, err)
	}
	q.consumers[subject] = cn
	return cn, nil
}
