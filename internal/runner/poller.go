package runner

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/metrics"
)

// TaskQuerier queries many media tasks in one call.
type TaskQuerier interface {
	GetTasks(ctx context.Context, taskIDs []string) ([]apiclient.Task, error)
}

// PollerConfig configures a Poller.
type PollerConfig struct {
	// Client answers batch queries. Required.
	Client TaskQuerier
	// MaxInterval caps a task's poll interval (SLUICE_POLL_INTERVAL).
	// Defaults to 5s.
	MaxInterval time.Duration
	// FirstDelay is the wait before a new task's first poll; the interval
	// then doubles up to MaxInterval. Defaults to 1s (or MaxInterval if
	// smaller).
	FirstDelay time.Duration
	// Concurrency bounds batch queries in flight at once. Defaults to 4.
	Concurrency int
	// Metrics is optional.
	Metrics *metrics.Metrics
	// Logger defaults to a disabled logger.
	Logger *zerolog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
}

// PollUpdate is what a watcher learns from one poll: the task, or an error
// that applies to it (the task went missing from batch answers, its
// element of one was malformed, or upstream refused the query for good).
type PollUpdate struct {
	Task *apiclient.Task
	Err  error
}

// errTaskMissing is sent when batch answers left a task out three times
// running; the watcher should query it on its own.
var errTaskMissing = errors.New("task missing from batch query answers")

// errBadElement is sent for a task whose element of a batch answer could
// not be read; the watcher should query it on its own.
var errBadElement = errors.New("task's element of a batch query answer is malformed")

// Poller polls every media task this worker waits for with batch queries
// of up to apiclient.MaxBatch ids. One goroutine schedules all tasks: each
// task's interval starts at FirstDelay and doubles to MaxInterval, and a
// round that has fewer than ten due tasks takes tasks due soon along, so
// batches stay full. A 429 or Retry-After pauses all polling. Tasks wait
// for their turn in a heap ordered by due time, so a round costs in the
// tasks it polls, not in the tasks watched.
type Poller struct {
	cfg  PollerConfig
	log  zerolog.Logger
	wake chan struct{}

	mu         sync.Mutex
	tasks      map[string]*watch
	queue      dueQueue // watches not in flight, earliest first
	pauseUntil time.Time
	// lastSent is when a round last sent queries.
	lastSent time.Time
}

// watch is one polled task and everyone waiting for it: two deliveries
// of one job on this worker (a redelivery while the first still waits)
// share its polls, and each is told every update.
type watch struct {
	id       string
	next     time.Time
	interval time.Duration
	misses   int
	watchers []*watcher
	// index is the watch's position in the queue; -1 while it is in
	// flight or stopped.
	index int
}

// watcher is one Watch call's notify.
type watcher struct{ notify func(PollUpdate) }

// dueQueue is a heap of watches ordered by their next poll
// (container/heap).
type dueQueue []*watch

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *dueQueue) Push(x any) {
	w := x.(*watch)
	w.index = len(*q)
	*q = append(*q, w)
}
func (q *dueQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	w.index = -1
	return w
}

// NewPoller returns a Poller; call Run to start it.
func NewPoller(cfg PollerConfig) *Poller {
	cfg.MaxInterval = cmp.Or(cfg.MaxInterval, 5*time.Second)
	cfg.FirstDelay = min(cmp.Or(cfg.FirstDelay, time.Second), cfg.MaxInterval)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, 4)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		l := zerolog.Nop()
		cfg.Logger = &l
	}
	return &Poller{cfg: cfg, log: *cfg.Logger, wake: make(chan struct{}, 1), tasks: make(map[string]*watch)}
}

// Watch starts polling taskID and calls notify with every update, from
// the goroutine that ran the query; notify must not block. No goroutine
// waits for a watched task: that is what lets a worker wait for thousands.
// Watches of a task that is watched already share its polls, and each is
// notified. stop ends this watch; notify may still be called once after it
// returns.
func (p *Poller) Watch(taskID string, notify func(PollUpdate)) (stop func()) {
	me := &watcher{notify: notify}
	p.mu.Lock()
	w := p.tasks[taskID]
	if w == nil {
		w = &watch{id: taskID, interval: p.cfg.FirstDelay, next: p.cfg.Now().Add(p.cfg.FirstDelay)}
		p.tasks[taskID] = w
		heap.Push(&p.queue, w)
	}
	// Appending leaves the elements a query's notes hold as they are.
	w.watchers = append(w.watchers, me)
	n := len(p.tasks)
	p.mu.Unlock()
	p.cfg.Metrics.PollWatched(n)
	p.poke()
	return func() {
		p.mu.Lock()
		// A new slice: a query's notes hold the old one, outside the lock.
		w.watchers = slices.DeleteFunc(slices.Clone(w.watchers), func(o *watcher) bool { return o == me })
		if len(w.watchers) == 0 {
			if p.tasks[taskID] == w {
				delete(p.tasks, taskID)
			}
			if w.index >= 0 {
				heap.Remove(&p.queue, w.index)
			}
		}
		n := len(p.tasks)
		p.mu.Unlock()
		p.cfg.Metrics.PollWatched(n)
	}
}

func (p *Poller) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run polls until ctx is done.
func (p *Poller) Run(ctx context.Context) {
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		batches, sleep := p.round(p.cfg.Now())
		for _, b := range batches {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			wg.Go(func() {
				defer func() { <-sem }()
				p.query(ctx, b)
			})
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-p.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// minRound keeps the scheduler from spinning on many tasks whose due times
// differ by microseconds.
const minRound = 10 * time.Millisecond

// fillScan bounds how many queued watches a round looks at for tasks due
// soon; those it skips wait for a later round.
const fillScan = 64

// round picks the tasks to poll now, grouped into batches, and how long to
// sleep before the next round. A picked task leaves the queue until its
// query ends.
func (p *Poller) round(now time.Time) (batches [][]*watch, sleep time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now.Before(p.pauseUntil) {
		return nil, p.pauseUntil.Sub(now)
	}
	var due []*watch
	for len(p.queue) > 0 && !p.queue[0].next.After(now) {
		due = append(due, heap.Pop(&p.queue).(*watch))
	}
	if len(due) == 0 {
		nextWake := now.Add(time.Second)
		if len(p.queue) > 0 && p.queue[0].next.Before(nextWake) {
			nextWake = p.queue[0].next
		}
		// Nothing is due: wake when the first task is, but not sooner than
		// minRound after the last round that sent queries. While tasks keep
		// coming due that paces rounds, so each gathers what fell due
		// since (fewer wake-ups); a lone task after a quiet spell is polled
		// on time.
		return nil, max(nextWake.Sub(now), p.lastSent.Add(minRound).Sub(now), time.Millisecond)
	}
	// Fill the last batch with the tasks due soonest among those due
	// within half their interval. No task's interval exceeds MaxInterval,
	// so none due later than half of it can qualify.
	var skipped []*watch
	for fill := (apiclient.MaxBatch - len(due)%apiclient.MaxBatch) % apiclient.MaxBatch; fill > 0 && len(p.queue) > 0 && len(skipped) < fillScan; {
		w := p.queue[0]
		wait := w.next.Sub(now)
		if wait > p.cfg.MaxInterval/2 {
			break
		}
		heap.Pop(&p.queue)
		if wait <= w.interval/2 {
			due = append(due, w)
			fill--
		} else {
			skipped = append(skipped, w)
		}
	}
	for _, w := range skipped {
		heap.Push(&p.queue, w)
	}
	for len(due) > 0 {
		n := min(apiclient.MaxBatch, len(due))
		batches = append(batches, due[:n])
		due = due[n:]
	}
	p.lastSent = now
	return batches, minRound
}

// query sends one batch query and delivers its answers.
func (p *Poller) query(ctx context.Context, batch []*watch) {
	ids := make([]string, len(batch))
	for i, w := range batch {
		ids[i] = w.id
	}
	p.cfg.Metrics.PollBatch(len(ids))
	tasks, err := p.cfg.Client.GetTasks(ctx, ids)
	now := p.cfg.Now()
	// The tasks whose elements were malformed are asked alone at once;
	// the others of the batch are told what the answer says of them.
	var bad []string
	if be, ok := errors.AsType[*apiclient.BadElementsError](err); ok {
		bad, err = be.TaskIDs, nil
	}

	type note struct {
		to []*watcher
		u  PollUpdate
	}
	var notes []note
	defer func() {
		// Outside the lock: a watcher may stop its watch from notify.
		for _, n := range notes {
			for _, to := range n.to {
				to.notify(n.u)
			}
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range batch {
		w.interval = min(w.interval*2, p.cfg.MaxInterval)
		w.next = now.Add(w.interval)
		if p.tasks[w.id] == w {
			heap.Push(&p.queue, w)
		}
	}
	if err != nil {
		if ra, ok := apiclient.RetryAfterOf(err); ok {
			p.pauseUntil = now.Add(ra)
			p.log.Warn().Dur("pause", ra).Msg("media API asked to slow down; pausing polls")
		} else {
			p.log.Warn().Err(err).Int("tasks", len(ids)).Msg("batch task query failed")
		}
		if apiclient.IsPermanent(err) {
			for _, w := range batch {
				notes = append(notes, note{w.watchers, PollUpdate{Err: err}})
			}
		}
		return
	}
	seen := make(map[string]bool, len(tasks)+len(bad))
	for _, id := range bad {
		if w, ok := p.tasks[id]; ok && !seen[id] {
			seen[id] = true
			notes = append(notes, note{w.watchers, PollUpdate{Err: errBadElement}})
		}
	}
	for i := range tasks {
		t := &tasks[i]
		w, ok := p.tasks[t.Output.TaskID]
		if !ok || seen[w.id] {
			continue
		}
		seen[w.id] = true
		w.misses = 0
		notes = append(notes, note{w.watchers, PollUpdate{Task: t}})
	}
	for _, w := range batch {
		if !seen[w.id] {
			if w.misses++; w.misses >= 3 {
				w.misses = 0
				notes = append(notes, note{w.watchers, PollUpdate{Err: errTaskMissing}})
			}
		}
	}
}
