package jobclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// Target is a job to wait for.
type Target struct {
	ID   string
	Kind jobspec.Kind
}

// Counts tallies the jobs of a Wait by phase.
type Counts struct {
	Total int `json:"total"`
	// Queued counts the jobs not yet submitted upstream: queued,
	// received or submitting.
	Queued int `json:"queued"`
	// Submitted counts the jobs upstream accepted but has not reported
	// running.
	Submitted int `json:"submitted"`
	// Running counts the jobs running upstream or having their artifacts
	// copied.
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
}

// Done counts the jobs that have ended.
func (c Counts) Done() int { return c.Succeeded + c.Failed + c.Cancelled }

func (c *Counts) move(from, to string, n int) {
	for _, p := range []struct {
		s string
		d int
	}{{from, -n}, {to, n}} {
		switch p.s {
		case "queued":
			c.Queued += p.d
		case "submitted":
			c.Submitted += p.d
		case "running":
			c.Running += p.d
		case string(state.StatusSucceeded):
			c.Succeeded += p.d
		case string(state.StatusFailed):
			c.Failed += p.d
		case string(state.StatusCancelled):
			c.Cancelled += p.d
		}
	}
}

// phase groups a job status into the phases Counts tallies.
func phase(status string) string {
	switch state.Status(status) {
	case state.StatusSubmitted:
		return "submitted"
	case state.StatusRunning, state.StatusCollecting:
		return "running"
	case state.StatusSucceeded, state.StatusFailed, state.StatusCancelled:
		return status
	default:
		return "queued"
	}
}

// rank orders statuses so that news never moves a job backwards.
func rank(status string) int {
	switch state.Status(status) {
	case state.StatusReceived:
		return 1
	case state.StatusSubmitting:
		return 2
	case state.StatusSubmitted:
		return 3
	case state.StatusRunning:
		return 4
	case state.StatusCollecting:
		return 5
	case state.StatusSucceeded, state.StatusFailed, state.StatusCancelled:
		return 6
	default:
		return 0
	}
}

// SkewAllowance is how far before WaitOptions.Since events still count,
// so that a client clock ahead of the server's loses nothing. An earlier
// event of the same job id is of the same job (ids are deduplicated), so
// counting it is right.
const SkewAllowance = time.Minute

// WaitOptions tunes Wait.
type WaitOptions struct {
	// Since is when the jobs were published, taken before publishing:
	// events from then on (less SkewAllowance) count. Defaults to now.
	Since time.Time
	// Recheck is how often the state records of unfinished jobs are read
	// again, in case an event went missing. Defaults to 15s.
	Recheck time.Duration
	// SetupPoll is how often Wait looks for SLUICE_EVENTS while no worker
	// has created it. Defaults to 1s.
	SetupPoll time.Duration
	// OnProgress is called when a job moves to another phase, with the
	// job and the counts after the move. Defaults to none.
	OnProgress func(Job, Counts)
	// OnRetrying is called when an unfinished job's state record shows a
	// new last error (the step it retries, see Job.LastError). Defaults
	// to none.
	OnRetrying func(Job)
	// OnNotSetUp is called once when SLUICE_EVENTS does not exist yet;
	// Wait keeps looking for it. Defaults to none.
	OnNotSetUp func()
}

func (o WaitOptions) withDefaults(now time.Time) WaitOptions {
	if o.Since.IsZero() {
		o.Since = now
	}
	o.Recheck = cmp.Or(o.Recheck, 15*time.Second)
	o.SetupPoll = cmp.Or(o.SetupPoll, time.Second)
	return o
}

// WaitResult is where the jobs of a Wait stand.
type WaitResult struct {
	// Jobs holds one Job per target, in target order.
	Jobs   []Job
	Counts Counts
}

// Wait follows the targets until every one has ended, from the events on
// SLUICE_EVENTS since o.Since and from their state records, so that a job
// that ended before Wait started counts as well as one that ends later.
// While no worker has created SLUICE_EVENTS it calls o.OnNotSetUp and
// keeps looking.
//
// It returns the result with a nil error when every job ended. When ctx
// ends first it returns the result so far (unfinished jobs keep their last
// known status) with an error wrapping context.Cause(ctx), for example
// ErrTimeout. Any other error (the connection lost for good) comes with
// the result so far too.
func (c *Client) Wait(ctx context.Context, targets []Target, o WaitOptions) (*WaitResult, error) {
	o = o.withDefaults(c.now())
	w := newWaiter(targets, o.OnProgress)
	w.retrying = o.OnRetrying
	if w.finished() {
		return w.result(), nil
	}
	ended := func() (*WaitResult, error) {
		// The records are read once more, briefly, so that a job that
		// did not end shows why it stays where it is (its last error).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = c.recheck(rctx, w)
		cancel()
		return w.result(), fmt.Errorf("wait: %w", context.Cause(ctx))
	}

	for notified := false; ; {
		_, err := c.eventsStream(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ended()
		}
		if !errors.Is(err, ErrNotSetUp) {
			return w.result(), err
		}
		if !notified && o.OnNotSetUp != nil {
			o.OnNotSetUp()
		}
		notified = true
		select {
		case <-ctx.Done():
			return ended()
		case <-time.After(o.SetupPoll):
		}
	}

	start := o.Since.Add(-SkewAllowance).UTC()
	cons, err := c.js.OrderedConsumer(ctx, contract.EventsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: eventFilters(targets),
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &start,
	})
	if err != nil {
		if ctx.Err() != nil {
			return ended()
		}
		return w.result(), c.jsErr(fmt.Errorf("follow %s: %w", contract.EventsStream, err))
	}
	it, err := cons.Messages()
	if err != nil {
		return w.result(), fmt.Errorf("follow %s: %w", contract.EventsStream, err)
	}
	defer it.Stop()
	msgs := make(chan jetstream.Msg)
	failed := make(chan error, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			m, err := it.Next()
			if err != nil {
				failed <- err
				return
			}
			select {
			case msgs <- m:
			case <-stop:
				return
			}
		}
	}()

	// The records cover the jobs whose events are older than the
	// consumer's start; the consumer covers everything from its start on.
	if err := c.recheck(ctx, w); err != nil {
		if ctx.Err() != nil {
			return ended()
		}
		return w.result(), err
	}
	tick := time.NewTicker(o.Recheck)
	defer tick.Stop()
	for !w.finished() {
		select {
		case <-ctx.Done():
			return ended()
		case m := <-msgs:
			var ev events.Event
			if json.Unmarshal(m.Data(), &ev) == nil && ev.Data.JobID != "" {
				w.update(JobFromEvent(&ev))
			}
		case err := <-failed:
			if ctx.Err() != nil {
				return ended()
			}
			return w.result(), fmt.Errorf("follow %s: %w", contract.EventsStream, err)
		case <-tick.C:
			if err := c.recheck(ctx, w); err != nil && ctx.Err() == nil {
				return w.result(), err
			}
		}
	}
	return w.result(), nil
}

// eventFilters returns sluice.events.<kind>.> for each kind among the
// targets, or sluice.events.> when a kind is unknown.
func eventFilters(targets []Target) []string {
	seen := map[jobspec.Kind]bool{}
	var out []string
	for _, t := range targets {
		if !t.Kind.Valid() {
			return []string{contract.EventsSubjectPrefix + ">"}
		}
		if !seen[t.Kind] {
			seen[t.Kind] = true
			out = append(out, contract.EventsSubjectPrefix+string(t.Kind)+".>")
		}
	}
	return out
}

// recheck reads the state record of every unfinished job. A missing
// bucket or record leaves the job as it is.
func (c *Client) recheck(ctx context.Context, w *waiter) error {
	store, err := c.stateStore(ctx, false)
	if errors.Is(err, ErrNotSetUp) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, id := range w.unfinished() {
		rec, _, err := store.Get(ctx, id)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return c.jsErr(err)
		}
		w.update(JobFromRecord(rec))
	}
	return nil
}

// waiter keeps where each job of a Wait stands.
type waiter struct {
	order    []string
	jobs     map[string]*Job
	counts   Counts
	progress func(Job, Counts)
	retrying func(Job)
}

func newWaiter(targets []Target, progress func(Job, Counts)) *waiter {
	w := &waiter{jobs: make(map[string]*Job, len(targets)), progress: progress}
	for _, t := range targets {
		if _, dup := w.jobs[t.ID]; dup {
			continue
		}
		w.order = append(w.order, t.ID)
		w.jobs[t.ID] = &Job{ID: t.ID, Kind: string(t.Kind), Status: StatusQueued, Artifacts: []state.Artifact{}}
	}
	w.counts = Counts{Total: len(w.order), Queued: len(w.order)}
	return w
}

// update takes news of a job, unless it is about another job, the job has
// already ended, or the news is older than what is known.
func (w *waiter) update(j Job) {
	cur, ok := w.jobs[j.ID]
	if !ok || cur.Terminal() || rank(j.Status) < rank(cur.Status) {
		return
	}
	if j.Kind == "" {
		j.Kind = cur.Kind
	}
	if j.fromEvent && j.Status == cur.Status {
		// An event carries no last error; the record's still holds.
		j.LastError = cur.LastError
	}
	if j.LastError != nil && !j.LastError.Same(cur.LastError) && w.retrying != nil {
		defer w.retrying(j)
	}
	from, to := phase(cur.Status), phase(j.Status)
	*cur = j
	if from != to {
		w.counts.move(from, to, 1)
		if w.progress != nil {
			w.progress(j, w.counts)
		}
	}
}

func (w *waiter) finished() bool { return w.counts.Done() == w.counts.Total }

func (w *waiter) unfinished() []string {
	var ids []string
	for _, id := range w.order {
		if !w.jobs[id].Terminal() {
			ids = append(ids, id)
		}
	}
	return ids
}

func (w *waiter) result() *WaitResult {
	r := &WaitResult{Jobs: make([]Job, len(w.order)), Counts: w.counts}
	for i, id := range w.order {
		r.Jobs[i] = *w.jobs[id]
	}
	return r
}
