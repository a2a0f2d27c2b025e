// Package watchdog finds the jobs a worker holds that stay in one step far
// longer than the step's bound, for what no test predicted: a wait that
// has no end. A job past Factor times its step's deadline is logged once
// with its step and age, counted by step (sluice_jobs_stuck) and marked
// in its record (enqueue jobs --stuck, the console); past HandBackFactor
// times that deadline its delivery is handed back to JetStream (Nak)
// instead of being heartbeated for ever, and its context is cancelled.
package watchdog

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// LogStuck and LogHandedBack are the watchdog's log messages.
const (
	LogStuck      = "job stuck in one step far longer than its bound"
	LogHandedBack = "job stuck past its hard bound; handing its delivery back"
)

// Config is how a Watchdog judges and reports. Zero fields take their
// defaults.
type Config struct {
	// Factor times a step's deadline is the step's bound. Defaults to 3.
	Factor float64
	// HandBackFactor times a step's deadline is the hard bound, past which
	// the delivery is handed back. Defaults to 10; at least Factor.
	HandBackFactor float64
	// Interval spaces the checks (Run). Defaults to 15s.
	Interval time.Duration
	// Now reads the clock. Defaults to time.Now.
	Now func() time.Time
	Log zerolog.Logger
	// Counted, when set, is given the number of stuck jobs of each step
	// after every check (a gauge), 0 for a step no longer stuck.
	Counted func(step string, n int)
	// Mark, when set, records in a job's record that it is stuck (best
	// effort: it is called once per job and step, outside the lock).
	Mark func(ctx context.Context, id, step string, since time.Time)
}

// Watchdog tracks the jobs a worker holds. A nil *Watchdog tracks nothing.
type Watchdog struct {
	cfg  Config
	mu   sync.Mutex
	jobs map[*Job]struct{}
	seen map[string]bool // steps counted before, reported 0 once gone
}

// New returns a Watchdog with cfg's defaults filled in.
func New(cfg Config) *Watchdog {
	cfg.Factor = cmp.Or(cfg.Factor, 3)
	cfg.HandBackFactor = max(cmp.Or(cfg.HandBackFactor, 10), cfg.Factor)
	cfg.Interval = cmp.Or(cfg.Interval, 15*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Watchdog{cfg: cfg, jobs: map[*Job]struct{}{}, seen: map[string]bool{}}
}

// Job is one held delivery of a job as the watchdog sees it.
type Job struct {
	w        *Watchdog
	id, kind string
	// Guarded by w.mu.
	step     string
	since    time.Time
	deadline time.Duration // 0: the step has no bound
	marked   bool          // logged and marked stuck in this step
	handBack func()        // hands the delivery back and stops the job
	settled  func() bool   // the delivery is settled: the job is done here
}

// Track starts watching a delivery of job id in step with deadline (0: no
// bound). settled reports when the delivery is settled, which ends the
// tracking; handBack hands the delivery back. It returns nil for a nil w.
func (w *Watchdog) Track(id, kind, step string, deadline time.Duration, settled func() bool, handBack func()) *Job {
	if w == nil {
		return nil
	}
	j := &Job{w: w, id: id, kind: kind, step: step, since: w.cfg.Now(), deadline: deadline, settled: settled, handBack: handBack}
	w.mu.Lock()
	w.jobs[j] = struct{}{}
	w.mu.Unlock()
	return j
}

// Step moves j to step, whose deadline is deadline (0: no bound); the
// same step again changes nothing. A nil j does nothing.
func (j *Job) Step(step string, deadline time.Duration) {
	if j == nil {
		return
	}
	j.w.mu.Lock()
	defer j.w.mu.Unlock()
	if j.step == step && j.deadline == deadline {
		return
	}
	j.step, j.since, j.deadline, j.marked = step, j.w.cfg.Now(), deadline, false
}

// Stuck is a job past its step's bound.
type Stuck struct {
	ID, Kind, Step string
	Since          time.Time
	Age, Bound     time.Duration
	HandedBack     bool
}

// Check looks at every tracked job once: it forgets the settled ones, logs
// and marks each newly stuck one, hands back those past the hard bound,
// reports the counts by step, and returns the stuck jobs.
func (w *Watchdog) Check(ctx context.Context) []Stuck {
	if w == nil {
		return nil
	}
	now := w.cfg.Now()
	var stuck, fresh []Stuck
	var back []func()
	w.mu.Lock()
	for j := range w.jobs {
		if j.settled() {
			delete(w.jobs, j)
			continue
		}
		age := now.Sub(j.since)
		if j.deadline <= 0 || age <= time.Duration(w.cfg.Factor*float64(j.deadline)) {
			continue
		}
		s := Stuck{ID: j.id, Kind: j.kind, Step: j.step, Since: j.since, Age: age, Bound: time.Duration(w.cfg.Factor * float64(j.deadline))}
		if age > time.Duration(w.cfg.HandBackFactor*float64(j.deadline)) {
			s.HandedBack = true
			back = append(back, j.handBack)
			delete(w.jobs, j)
		}
		if !j.marked {
			j.marked = true
			fresh = append(fresh, s)
		}
		stuck = append(stuck, s)
	}
	w.count(stuck)
	w.mu.Unlock()
	w.report(ctx, fresh, stuck, back)
	return stuck
}

// count reports the stuck jobs by step to Counted; w.mu is held.
func (w *Watchdog) count(stuck []Stuck) {
	if w.cfg.Counted == nil {
		return
	}
	n := map[string]int{}
	for s := range w.seen {
		n[s] = 0
	}
	for _, s := range stuck {
		n[s.Step]++
		w.seen[s.Step] = true
	}
	for step, c := range n {
		w.cfg.Counted(step, c)
	}
}

// report logs and marks the newly stuck jobs and hands back those past the
// hard bound, outside the lock.
func (w *Watchdog) report(ctx context.Context, fresh, stuck []Stuck, back []func()) {
	for _, s := range fresh {
		w.cfg.Log.Warn().Str("job_id", s.ID).Str("kind", s.Kind).Str("step", s.Step).
			Dur("age", s.Age).Dur("bound", s.Bound).Msg(LogStuck)
		if w.cfg.Mark != nil {
			w.cfg.Mark(ctx, s.ID, s.Step, s.Since)
		}
	}
	for _, s := range stuck {
		if s.HandedBack {
			w.cfg.Log.Warn().Str("job_id", s.ID).Str("kind", s.Kind).Str("step", s.Step).Dur("age", s.Age).Msg(LogHandedBack)
		}
	}
	for _, hb := range back {
		if hb != nil {
			hb()
		}
	}
}

// Run checks every Interval until ctx ends.
func (w *Watchdog) Run(ctx context.Context) {
	if w == nil {
		return
	}
	t := time.NewTicker(w.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.Check(ctx)
		}
	}
}
