package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// The utilization figure's fleet: three workers sharing a fleet quota of
// media tasks, polling every second.
const (
	utilQuota = 20
	utilPoll  = time.Second
)

// utilCase is one run of U1: tasks of taskTime, n jobs, and whether one
// worker is killed (SIGKILL, not replaced) once half the jobs ended.
type utilCase struct {
	taskTime time.Duration
	n        int
	kill     bool
}

// utilization measures U1: how full the fleet keeps a paid quota while
// jobs wait, the time-average of the tasks alive upstream from the first
// submit to the last divided by the quota, against its ideal T / (T + P/2)
// for task time T and poll interval P (docs/performance.md).
func (r *run) utilization(ctx context.Context) (*Figure, error) {
	fig := &Figure{ID: "U1", Title: fmt.Sprintf("quota utilization, 3 workers, fleet quota %d", utilQuota),
		Target: "≥ 0.95 of the ideal T / (T + P/2) in every case, through a worker's death too"}
	fig.Settings = []string{
		fmt.Sprintf("SLUICE_FLEET_MEDIA_TASKS=%d, SLUICE_POLL_INTERVAL=%s on every worker (default 5s)", utilQuota, utilPoll),
		"SLUICE_ACK_WAIT at its default (60s); a killed worker's death is known from the NATS server within seconds (docs/lifecycle.md#a-workers-death)",
		"the kill: SIGKILL of one worker at a random moment of the task time after half the jobs ended; it is not replaced",
		"task times: T plus or minus half a poll interval, uniformly (the simulator's [sim:duration] per job)",
	}
	cases := []utilCase{
		{20 * time.Second, pick(r, 200, 60), false},
		{20 * time.Second, pick(r, 200, 60), true},
		{3 * time.Second, pick(r, 600, 120), true},
	}
	met := true
	var measured []string
	for i, c := range cases {
		u, err := r.utilPhase(ctx, fmt.Sprintf("u1-%d", i), c)
		if err != nil {
			return fig, err
		}
		ideal := c.taskTime.Seconds() / (c.taskTime.Seconds() + utilPoll.Seconds()/2)
		ratio := u / ideal
		met = met && ratio >= 0.95
		label := fmt.Sprintf("%s tasks, %d jobs", c.taskTime, c.n)
		if c.kill {
			label += ", a worker killed"
		}
		fig.row(label, "utilization %.2f, ideal %.2f: %.2f of the ideal", u, ideal, ratio)
		measured = append(measured, fmt.Sprintf("%s: %.2f of the ideal", label, ratio))
	}
	fig.Measured, fig.Met = strings.Join(measured, "; "), met
	fig.Notes = []string{"A task is alive upstream from its submit (its submitted event) for its task time; " +
		"the figure is the overlap of those spans with the first-to-last submit window, divided by the quota and the window."}
	return fig, nil
}

// utilPhase runs one case on a fresh stack and returns its utilization.
func (r *run) utilPhase(ctx context.Context, name string, c utilCase) (float64, error) {
	st, err := newStack(ctx, r.scenarioDir(name), stackOptions{Media: apisim.MediaConfig{ResultSize: 1 << 10, TaskDuration: c.taskTime}})
	if err != nil {
		return 0, err
	}
	defer st.close()
	env := map[string]string{
		"SLUICE_FLEET_MEDIA_TASKS": strconv.Itoa(utilQuota),
		"SLUICE_POLL_INTERVAL":     utilPoll.String(),
	}
	var workers []*worker
	defer func() {
		for _, w := range workers {
			w.stop(30 * time.Second)
		}
	}()
	for i := range 3 {
		w, err := r.startWorker(ctx, st, fmt.Sprintf("%s-worker-%d", name, i), env)
		if err != nil {
			return 0, err
		}
		workers = append(workers, w)
	}
	tr, err := st.track(name)
	if err != nil {
		return 0, err
	}
	defer tr.close()
	// Each task runs T plus or minus half a poll interval, so that its end
	// falls at a random phase of the poll schedule: the assumption behind
	// the ideal's P/2. Tasks of exactly 3 s, a multiple of the 1 s poll,
	// end just as their third poll is sent, which measures that
	// coincidence rather than the fleet.
	durations := make(map[string]time.Duration, c.n)
	for _, id := range jobIDs(name, c.n) {
		d := c.taskTime - utilPoll/2 + rand.N(utilPoll)
		durations[id] = d
		if _, err := st.publishJobs(ctx, []string{id}, fmt.Sprintf("[sim:duration=%dms]", d.Milliseconds())); err != nil {
			return 0, err
		}
	}
	within := time.Duration(c.n/utilQuota+2)*(c.taskTime+utilPoll)*2 + 2*time.Minute
	if c.kill {
		if err := tr.waitEnded(ctx, c.n/2, within); err != nil {
			return 0, err
		}
		// A job's end starts the next submit on its worker within
		// milliseconds: killed on the event, the victim would die inside
		// a paid submit a third of the time. A random moment of the next
		// task's life decorrelates the kill from the victim's jobs.
		after := rand.N(c.taskTime + utilPoll)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(after):
		}
		workers[0].kill()
		r.logf("U1 %s: killed %s %s after %d jobs ended", name, workers[0].name, after.Round(time.Millisecond), c.n/2)
		workers = workers[1:]
	}
	if err := tr.waitEnded(ctx, c.n, within); err != nil {
		return 0, err
	}
	tr.mu.Lock()
	var spans []taskSpan
	for id, at := range tr.seen["submitted"] {
		spans = append(spans, taskSpan{at, durations[id]})
	}
	tr.mu.Unlock()
	return utilizationOf(spans, utilQuota), nil
}

// taskSpan is one task alive upstream: from its submit for its task time.
type taskSpan struct {
	submit time.Time
	task   time.Duration
}

// utilizationOf is the time-average of the tasks alive over the window
// from the first submit to the last, divided by quota.
func utilizationOf(spans []taskSpan, quota int) float64 {
	if len(spans) < 2 {
		return 0
	}
	slices.SortFunc(spans, func(a, b taskSpan) int { return a.submit.Compare(b.submit) })
	first, last := spans[0].submit, spans[len(spans)-1].submit
	window := last.Sub(first)
	if window <= 0 {
		return 0
	}
	var alive time.Duration
	for _, s := range spans {
		alive += min(s.task, last.Sub(s.submit))
	}
	return alive.Seconds() / (window.Seconds() * float64(quota))
}
