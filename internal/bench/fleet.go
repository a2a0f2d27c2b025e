package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// fleetPhase is one run of the fleet quota figure.
type fleetPhase struct {
	name       string
	peak       int
	busiest    int64
	busiestAll int64
	ended      int
	failed     int
	twice      int
	took       time.Duration
	cpu        time.Duration
}

// fleet measures Q1: several worker processes sharing the fleet quota of
// media tasks and the fleet request rate against one simulator; the
// simulator's highest count of tasks submitted and not yet terminal, and
// its busiest second of API requests, against the limits. Then the same
// with one worker killed (SIGKILL) and one added while the jobs run.
func (r *run) fleet(ctx context.Context) (*Figure, error) {
	n := pick(r, 300, 60)
	tasks := pick(r, 20, 6)
	rate := pick(r, 10, 5)
	fig := &Figure{ID: "Q1", Title: fmt.Sprintf("fleet quota, 3 workers, %d jobs", n),
		Target: fmt.Sprintf("peak tasks upstream ≤ %d; busiest second within 10%% of %d requests/s", tasks, rate)}
	env := map[string]string{
		"SLUICE_FLEET_MEDIA_TASKS": strconv.Itoa(tasks),
		"SLUICE_FLEET_MEDIA_RATE":  strconv.Itoa(rate),
		"SLUICE_ACK_WAIT":          "10s",
	}
	fig.Settings = []string{
		fmt.Sprintf("SLUICE_FLEET_MEDIA_TASKS=%d, SLUICE_FLEET_MEDIA_RATE=%d on every worker (defaults: no limit)", tasks, rate),
		"SLUICE_ACK_WAIT=10s (default 60s): the killed worker's jobs come back, and its leases turn to handed back, after 10 s",
	}
	load0 := loadAvg()
	steady, err := r.fleetPhase(ctx, "q1", n, env, false)
	if err != nil {
		return fig, err
	}
	churn, err := r.fleetPhase(ctx, "q1churn", n, env, true)
	if err != nil {
		return fig, err
	}
	load1 := loadAvg()
	met := true
	var measured []string
	for _, p := range []*fleetPhase{steady, churn} {
		ratio := float64(p.busiest) / float64(rate)
		ok := p.peak <= tasks && ratio <= 1 && ratio >= 0.9 && p.ended == n && p.twice == 0
		met = met && ok
		measured = append(measured, fmt.Sprintf("%s: peak %d, busiest second %d/s (%.2f×)", p.name, p.peak, p.busiest, ratio))
		fig.row(p.name+": highest tasks upstream at once (simulator)", "%d (limit %d)", p.peak, tasks)
		fig.row(p.name+": busiest second of API requests (simulator)", "%d (rate %d, %.2f×)", p.busiest, rate, ratio)
		fig.row(p.name+": busiest second with result downloads", "%d", p.busiestAll)
		fig.row(p.name+": jobs ended / failed / submitted twice", "%d / %d / %d", p.ended, p.failed, p.twice)
		fig.row(p.name+": publish to last terminal event", "%s", p.took.Round(100*time.Millisecond))
		fig.row(p.name+": worker CPU (user+sys) per job", "%s", ms(p.cpu/time.Duration(max(p.ended, 1))))
	}
	fig.row("load average (1, 5, 15 min) before / after", "%s / %s", load0, load1)
	fig.Measured, fig.Met = strings.Join(measured, "; "), met
	fig.Notes = []string{
		"Each phase has its own NATS, S3 store and simulator (tasks take 3 s, pending the first 0.75 s). " +
			"The simulator counts, at each submit, the tasks submitted and not yet terminal by its own clock, and every answered " +
			"request per wall-clock second; \"API requests\" leave out the result downloads, which go to the result addresses " +
			"(here on the simulator, in production on upstream's storage) and not through the media API client.",
		"The churn phase kills one of the three workers with SIGKILL once a third of the jobs have ended and starts a fourth " +
			"at once; the killed worker's tasks keep running upstream and are taken over by the workers their jobs are " +
			"redelivered to, without a second submit.",
	}
	return fig, nil
}

// fleetPhase runs n jobs through three workers; with churn, kills one and
// adds one when a third have ended.
func (r *run) fleetPhase(ctx context.Context, name string, n int, env map[string]string, churn bool) (_ *fleetPhase, err error) {
	st, err := newStack(ctx, r.scenarioDir(name), stackOptions{Media: apisim.MediaConfig{ResultSize: 1 << 10, TaskDuration: 3 * time.Second}})
	if err != nil {
		return nil, err
	}
	defer st.close()
	var workers []*worker
	defer func() {
		for _, w := range workers {
			w.stop(30 * time.Second)
		}
	}()
	var cpu time.Duration
	for i := range 3 {
		w, err := r.startWorker(ctx, st, fmt.Sprintf("%s-worker-%d", name, i), env)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}
	tr, err := st.track(name)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	start := time.Now()
	if _, err := st.publishJobs(ctx, jobIDs(name, n), ""); err != nil {
		return nil, err
	}
	within := time.Duration(n) * time.Second
	if churn {
		if err := tr.waitEnded(ctx, n/3, within); err != nil {
			return nil, err
		}
		victim := workers[0]
		if s, err := victim.stats(); err == nil {
			cpu += s.CPU
		}
		victim.kill()
		workers = workers[1:]
		r.logf("Q1: killed %s after %d jobs ended", victim.name, n/3)
		w, err := r.startWorker(ctx, st, name+"-worker-3", env)
		if err != nil {
			return nil, err
		}
		workers = append(workers, w)
	}
	if err := tr.waitEnded(ctx, n, within); err != nil {
		return nil, err
	}
	p := &fleetPhase{name: map[bool]string{false: "steady", true: "churn"}[churn], took: tr.lastTerminal().Sub(start)}
	for _, w := range workers {
		if s, err := w.stats(); err == nil {
			cpu += s.CPU
		}
	}
	p.cpu = cpu
	p.ended, p.failed = tr.terminalCount()
	c := st.media.Counters()
	p.peak = c.PeakRunning()
	_, p.busiest = c.BusiestSecond(apisim.EndpointResult)
	_, p.busiestAll = c.BusiestSecond()
	for k, v := range c.Snapshot() {
		if strings.HasPrefix(k, "submits:") && v > 1 {
			p.twice++
		}
	}
	r.logf("Q1 %s: peak %d, busiest second %d, %d ended in %s", p.name, p.peak, p.busiest, p.ended, p.took.Round(time.Second))
	return p, nil
}
