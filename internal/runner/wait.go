package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
)

// waitTask detaches j until its task is terminal. No goroutine waits for
// the task: the job is handed to the poller, the cancel registry, a
// deadline timer and the runner's stop watch, and each of them posts an
// event to the job's waiter. The first event starts a goroutine that
// handles the events queued (a "running" checkpoint, a query of a task the
// batch answers left out) and exits when none is left, or ends the job:
// collect the results, publish the terminal event and settle the message.
// A waiting job so costs its state (about 4 KiB), not a goroutine stack (8
// KiB more): that is what lets one worker wait for 10,000 tasks
// (docs/performance.md, P3).
func (r *Runner) waitTask(ctx context.Context, j *job) consumer.Outcome {
	since := r.cfg.Now()
	if j.rec.SubmittedAt != nil {
		since = *j.rec.SubmittedAt
	}
	// busy until the set-up below is done: events that come meanwhile are
	// queued, and handled once it is.
	w := &waiter{r: r, ctx: ctx, j: j, deadline: since.Add(r.cfg.TaskTimeout), busy: true}
	_, w.span = r.startSpan(ctx, "wait")
	w.unwatch = r.cfg.Poller.Watch(j.rec.Upstream.TaskID, w.onUpdate)
	w.timer = time.AfterFunc(w.deadline.Sub(r.cfg.Now()), func() { w.post(evDeadline, nil) })
	r.track(w)
	// A cancel or a stop that came first is noticed here; one that comes
	// later, by the hook and the stop watch. No hook is set when another
	// delivery of the same job registered on this worker since: a cancel
	// then reaches that one, and this one sees it in the record.
	r.cfg.Cancels.onCancel(j.id, j.cancel, func() { w.post(evCancel, nil) })
	if j.cancelled() {
		w.post(evCancel, nil)
	}
	if j.stopping() {
		w.post(evStop, nil)
	}
	w.mu.Lock()
	start := w.events != 0
	w.busy = start
	w.mu.Unlock()
	if start {
		w.r.cfg.Pool.Go(w.run)
	}
	return consumer.Outcome{Action: consumer.Detach}
}

// waitEvent is what a waiting job is told; a waiter keeps each kind once.
type waitEvent uint8

const (
	evStop waitEvent = 1 << iota
	evCancel
	evDeadline
	evUpdate
)

// waitOrder is the order a waiter handles its events in: a stop first, so
// a stopping worker hands its jobs back at once.
var waitOrder = [...]waitEvent{evStop, evCancel, evDeadline, evUpdate}

// waiter is a detached job waiting for its task.
type waiter struct {
	r        *Runner
	ctx      context.Context
	j        *job
	deadline time.Time
	unwatch  func()
	timer    *time.Timer

	mu     sync.Mutex
	events waitEvent
	// update is the latest poll update not handled yet.
	update PollUpdate
	// busy: a goroutine is handling events; ended: the wait is over.
	busy, ended bool
	// span is the wait's span; polls counts the poll updates it saw.
	span  trace.Span
	polls int
}

// onUpdate posts u, or only counts it when it brings no news and no
// goroutine handles the job's events: at 100,000 waiting jobs that spares
// 20,000 goroutine hand-offs a second. While one runs it may be changing
// the record mediaPollNews reads, so it is told every update.
func (w *waiter) onUpdate(u PollUpdate) {
	w.mu.Lock()
	if !w.busy && !w.ended && !mediaPollNews(w.ctx, w.j, u) {
		w.polls++
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.post(evUpdate, &u)
}

// mediaPollNews reports whether u would make a waiting job act (see
// waiter.handle and observeTask): an error, a terminal task, a task seen
// running first, a cancel to carry out, or a job that stops.
func mediaPollNews(ctx context.Context, j *job, u PollUpdate) bool {
	if u.Err != nil || u.Task == nil || ctx.Err() != nil || j.cancelled() {
		return true
	}
	st := u.Task.Output.TaskStatus
	return st.Terminal() || st == apiclient.TaskRunning && j.rec.Status != state.StatusRunning
}

// post queues ev (with u for evUpdate) and starts a goroutine to handle it
// unless one runs. It never blocks: the poller, the cancel registry and
// timers call it.
func (w *waiter) post(ev waitEvent, u *PollUpdate) {
	w.mu.Lock()
	if w.ended {
		w.mu.Unlock()
		return
	}
	w.events |= ev
	if u != nil {
		w.update = *u
	}
	start := !w.busy
	w.busy = true
	w.mu.Unlock()
	if start {
		w.r.cfg.Pool.Go(w.run)
	}
}

// next takes the next event, or reports that none is left; the goroutine
// then exits and the job waits without one again.
func (w *waiter) next() (waitEvent, PollUpdate, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ev := range waitOrder {
		if w.events&ev != 0 {
			w.events &^= ev
			u := w.update
			if ev == evUpdate {
				w.update = PollUpdate{}
			}
			return ev, u, true
		}
	}
	w.busy = false
	return 0, PollUpdate{}, false
}

// run handles events until none is left or the job ends. A panic retries
// the job later, as the consumer does for a Handler's.
func (w *waiter) run() {
	defer func() {
		if p := recover(); p != nil {
			w.j.log.Error().Interface("panic", p).Msg("waiting job panicked; retrying it later")
			w.stopWaiting()
			w.j.unregister()
			out := consumer.Outcome{Action: consumer.Retry, Delay: 30 * time.Second}
			w.r.settleQuota(w.j, out)
			w.j.d.Settle(w.ctx, out)
		}
	}()
	for {
		ev, u, ok := w.next()
		if !ok {
			return
		}
		if task, err, done := w.handle(ev, u); done {
			w.stopWaiting()
			if task != nil && task.Output.TaskStatus.Terminal() {
				// The task no longer counts upstream while its results
				// are copied.
				w.r.releaseQuota(w.j)
			}
			if err == nil {
				err = w.r.collectTask(w.ctx, w.j, task)
			}
			w.j.d.Settle(w.ctx, w.r.end(w.ctx, w.j, err))
			return
		}
	}
}

// handle handles one event; done reports that the wait is over, with the
// terminal task or the error that ends the job.
func (w *waiter) handle(ev waitEvent, u PollUpdate) (task *apiclient.Task, err error, done bool) {
	r, j, ctx := w.r, w.j, w.ctx
	taskID := j.rec.Upstream.TaskID
	if ctx.Err() != nil {
		return nil, errStopping, true
	}
	switch ev {
	case evStop:
		return nil, errStopping, true
	case evCancel:
		return r.cancelTask(ctx, j)
	case evDeadline:
		return w.atDeadline()
	}
	w.polls++
	task = u.Task
	if u.Err != nil {
		// A query of its own must not outlast the task's deadline either.
		qctx, cancel := context.WithDeadline(ctx, w.deadline)
		task, err = r.cfg.Media.GetTask(qctx, taskID)
		cancel()
		switch {
		case errors.Is(err, apiclient.ErrTaskNotFound):
			return nil, taskForgotten(taskID), true
		case err != nil:
			// The task may run and bill on: keep waiting, but let the
			// record say why the job makes no progress (a task that is
			// never readable would otherwise wait silently to its
			// deadline).
			j.log.Warn().Err(err).Msg("task query failed")
			r.noteRetry(ctx, j, &retry{err: err, code: CodeUpstreamUnavailable})
			return nil, nil, false
		}
	}
	if err := r.observeTask(ctx, j, task); err != nil {
		return nil, err, true
	}
	if j.cancelled() && !task.Output.TaskStatus.Terminal() {
		// A cancel upstream did not carry out yet: ask again.
		return r.cancelTask(ctx, j)
	}
	return task, nil, task.Output.TaskStatus.Terminal()
}

// atDeadline ends the wait of a job whose task's deadline has passed. The
// deadline counts from submit, so a job delivered again after it (a long
// store outage, no worker for hours) reaches it before its first poll:
// upstream is asked once, and a task that ended meanwhile is collected (or
// fails, or is cancelled) as a poll would have it. Only a task not
// terminal, or one upstream does not answer for, fails timeout; it is
// cancelled, best effort, and a cancel refused because the task ended in
// between fetches it again instead.
func (w *waiter) atDeadline() (task *apiclient.Task, err error, done bool) {
	r, j, ctx := w.r, w.j, w.ctx
	taskID := j.rec.Upstream.TaskID
	qctx, cancel := context.WithTimeout(ctx, deadlineCallTimeout)
	task, err = r.cfg.Media.GetTask(qctx, taskID)
	cancel()
	if err != nil {
		j.log.Warn().Err(err).Msg("task query at the deadline failed")
	}
	if err != nil || !task.Output.TaskStatus.Terminal() {
		cctx, cancel := context.WithTimeout(ctx, deadlineCallTimeout)
		_, cerr := r.cfg.Media.CancelTask(cctx, taskID)
		task, err = nil, cerr
		switch {
		case errors.Is(cerr, apiclient.ErrTaskTerminal):
			task, err = r.cfg.Media.GetTask(cctx, taskID)
		case cerr != nil:
			j.log.Warn().Err(cerr).Msg("cancel after timeout failed")
		}
		cancel()
	}
	if err == nil && task != nil && task.Output.TaskStatus.Terminal() {
		if err := r.observeTask(ctx, j, task); err != nil {
			return nil, err, true
		}
		return task, nil, true
	}
	return nil, fail(CodeTimeout, state.StagePoll, false, "task %s not finished after %s (SLUICE_TASK_TIMEOUT)", taskID, r.cfg.TaskTimeout), true
}

// stopWaiting ends the wait: later events are dropped, and the poller, the
// timer and the stop watch let go of the job.
func (w *waiter) stopWaiting() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
	endWait(w.span, w.polls, nil)
	w.unwatch()
	w.timer.Stop()
	w.r.untrack(w)
}

// track adds w to the jobs told when their worker stops. One goroutine
// per consumer waits for its stop: a context.AfterFunc per waiting job
// would cost about 1.3 KiB of heap each.
func (r *Runner) track(w *waiter) {
	ch := w.j.d.Stopping()
	r.waitMu.Lock()
	defer r.waitMu.Unlock()
	r.waiting[w] = struct{}{}
	if ch == nil || r.stopWatched[ch] {
		return
	}
	r.stopWatched[ch] = true
	go func() {
		<-ch
		r.waitMu.Lock()
		var stopping []*waiter
		for w := range r.waiting {
			if w.j.d.Stopping() == ch {
				stopping = append(stopping, w)
			}
		}
		r.waitMu.Unlock()
		for _, w := range stopping {
			w.post(evStop, nil)
		}
	}()
}

func (r *Runner) untrack(w *waiter) {
	r.waitMu.Lock()
	delete(r.waiting, w)
	r.waitMu.Unlock()
}
