package consumer

import (
	"context"
	"fmt"
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

// maxAllocations bounds the allocations of one round: a class that gave
// fewer jobs than allotted (the rest are held elsewhere) leaves its slots
// to the next allocation.
const maxAllocations = 3

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
		q = &classQueues{kind: kind, consumers: make(map[string]jetstream.Consumer), heads: make(map[string]head)}
		s.byKind[kind] = q
	}
	return q
}

// fromClasses reports whether this round of q's kind pulls the class
// queues rather than the kind's consumer.
func (c *Consumer) fromClasses(q *classQueues) bool {
	return c.cfg.Policy.Enabled() || q.swept.Load()
}

// pullClasses allocates free slots over q's class queues and pulls them,
// holding and queueing what arrives; it returns how many arrived.
func (c *Consumer) pullClasses(ctx context.Context, q *classQueues, free int, queue chan<- jetstream.Msg) (int, error) {
	round, subjects, err := c.classRound(ctx, q)
	if err != nil || len(subjects) == 0 {
		return 0, err
	}
	got := 0
	for range maxAllocations {
		round.Free = free - got
		moved := 0
		for i, n := range q.stride.Allocate(round) {
			if n == 0 {
				continue
			}
			k, err := c.pullClass(ctx, q, subjects[i], n, queue)
			cl := &round.Classes[i]
			q.stride.Charge(cl.Tenant, c.cfg.Policy.Weight(cl.Tenant), k)
			got, moved = got+k, moved+k
			if room, capped := round.Room[cl.Tenant]; capped {
				round.Room[cl.Tenant] = room - k
			}
			if cl.Waiting -= k; k < n {
				cl.Waiting = 0
			}
			if err != nil {
				return got, err
			}
		}
		if moved == 0 || got == free {
			break
		}
	}
	return got, nil
}

// classRound reads the counts of q's class queues and returns the round
// to allocate, with the subject of each class.
func (c *Consumer) classRound(ctx context.Context, q *classQueues) (order.Round, []string, error) {
	p := c.cfg.Policy
	if q.stream == nil {
		s, err := c.cfg.JS.Stream(ctx, contract.JobsStream)
		if err != nil {
			return order.Round{}, nil, err
		}
		q.stream = s
	}
	info, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(contract.ClassesFilter(q.kind)))
	if err != nil {
		return order.Round{}, nil, err
	}
	now := time.Now()
	round := order.Round{Weight: p.Weight, Room: map[string]int{}, Spent: map[string]bool{}, Aging: c.cfg.PriorityAging, Now: now}
	var subjects []string
	for subject, n := range info.State.Subjects {
		cl, ok := contract.ParseClassSubject(subject)
		if !ok || cl.Kind != q.kind || n == 0 {
			continue
		}
		published, err := q.head(ctx, subject, info.State.FirstSeq, now)
		if err != nil {
			return order.Round{}, nil, err
		}
		subjects = append(subjects, subject)
		round.Classes = append(round.Classes, order.Class{Priority: cl.Priority, Tenant: cl.Tenant, Waiting: int(n), Head: published})
		round.Spent[cl.Tenant] = p.WaitingForBudget(cl.Tenant)
	}
	q.swept.Store(len(subjects) > 0)
	for subject := range q.heads {
		if info.State.Subjects[subject] == 0 {
			delete(q.heads, subject)
		}
	}
	if err := c.roomOf(ctx, q, subjects, round.Room); err != nil {
		return order.Round{}, nil, err
	}
	return round, subjects, nil
}

// head returns when the oldest job of a class queue was published, read
// at most every headTTL.
func (q *classQueues) head(ctx context.Context, subject string, firstSeq uint64, now time.Time) (time.Time, error) {
	if h, ok := q.heads[subject]; ok && now.Sub(h.read) < headTTL {
		return h.published, nil
	}
	raw, err := q.stream.GetMsg(ctx, max(firstSeq, 1), jetstream.WithGetMsgSubject(subject))
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

// roomOf fills room with how many more jobs each capped tenant may start:
// its cap less its jobs in flight, the messages its class consumers have
// delivered and not yet had acknowledged, across the fleet.
func (c *Consumer) roomOf(ctx context.Context, q *classQueues, subjects []string, room map[string]int) error {
	for _, subject := range subjects {
		cl, _ := contract.ParseClassSubject(subject)
		limit := c.cfg.Policy.MaxTasks(cl.Tenant, q.kind)
		if limit <= 0 {
			continue
		}
		if _, ok := room[cl.Tenant]; !ok {
			room[cl.Tenant] = limit
		}
		cn, err := c.classConsumer(ctx, q, subject)
		if err != nil {
			return err
		}
		info, err := cn.Info(ctx)
		if err != nil {
			return fmt.Errorf("consumer of %s: %w", subject, err)
		}
		room[cl.Tenant] -= info.NumAckPending
	}
	return nil
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
