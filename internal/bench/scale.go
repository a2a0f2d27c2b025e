package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// p3Target is P3's bound on the peak RSS of one worker holding the larger
// number of tasks.
const p3Target = 600 << 20

// p3Task is the prompt directive of P3's tasks. longTask's 10 minutes is
// too short here: on a busy machine the 100,000 submits alone took 6 min
// 43 s, and a task that ends before the measurement does fails the run.
const p3Task = "[sim:duration=1h]"

// scale measures P3: many long tasks in flight on one worker process, at
// two sizes in one run (each on a fresh stack and worker), so that the
// cost per task shows how memory and CPU grow: peak and steady RSS,
// goroutines and CPU per second at steady state.
func (r *run) scale(ctx context.Context) (*Figure, error) {
	sizes := pick(r, []int{10000, 100000}, []int{200, 2000})
	big := sizes[len(sizes)-1]
	fig := &Figure{ID: "P3", Title: fmt.Sprintf("scale, %d and %d long tasks in flight", sizes[0], big),
		Target: fmt.Sprintf("peak RSS ≤ %s and ≤ 1 core at %d tasks", mib(p3Target), big)}
	fig.Settings = []string{
		"SLUICE_MAX_INFLIGHT=<tasks> (default 256): every task in flight on one worker",
		"SLUICE_MEDIA_RATE_LIMIT=5000 (default 50 requests/s): 100,000 tasks polled every 5 s in batches of 10 need 2,000 requests/s, and the submits share the limit",
	}
	if r.o.Quick {
		fig.Settings = append(fig.Settings, "quick variant only: SLUICE_POLL_INTERVAL=1s and SLUICE_POLL_FIRST=250ms (defaults 5s and 1s), to reach steady state sooner")
	}
	for _, n := range sizes {
		p, err := r.scalePass(ctx, n)
		if err != nil {
			return fig, err
		}
		p.rows(fig, n)
		if n == big {
			fig.Measured = fmt.Sprintf("peak RSS %s, %.2f cores", mib(p.end.HWM), p.cpuPerSec)
			fig.Met = p.end.HWM <= p3Target && p.cpuPerSec <= 1
		}
	}
	fig.Notes = append(fig.Notes, fmt.Sprintf(
		"Each size on a fresh stack and worker process, which holds that many video jobs whose simulated tasks "+
			"run an hour (poll interval %s, heartbeats every 15 s). After every task was submitted and three "+
			"poll intervals more, CPU time is read from /proc/<pid>/stat %s apart; RSS from /proc/<pid>/status; "+
			"goroutines, heap and stacks from the worker's /metrics.",
		pick(r, 5*time.Second, time.Second), pick(r, 30*time.Second, 5*time.Second)))
	return fig, nil
}

// scalePass is one size of P3.
type scalePass struct {
	end                  procStats
	ramp                 time.Duration
	cpuPerSec, reqPerSec float64
	goroutines           float64
	heap, stacks         float64
}

func (p *scalePass) rows(fig *Figure, n int) {
	at := fmt.Sprintf(" (%d tasks)", n)
	fig.row("peak RSS (VmHWM, whole run)"+at, "%s", mib(p.end.HWM))
	fig.row("RSS at steady state (VmRSS)"+at, "%s (%.1f KiB per task)", mib(p.end.RSS), float64(p.end.RSS)/1024/float64(n))
	fig.row("Go heap in use at steady state"+at, "%s (%.1f KiB per task)", mib(uint64(p.heap)), p.heap/1024/float64(n))
	fig.row("goroutine stacks at steady state"+at, "%s", mib(uint64(p.stacks)))
	fig.row("goroutines"+at, "%.0f (%.3f per task)", p.goroutines, p.goroutines/float64(n))
	fig.row("CPU at steady state"+at, "%.1f ms per second (%.1f%% of one core)", p.cpuPerSec*1000, p.cpuPerSec*100)
	fig.row("status requests at steady state"+at, "%.1f per second", p.reqPerSec)
	fig.row("time to submit every task"+at, "%s", p.ramp.Round(100*time.Millisecond))
}

func (r *run) scalePass(ctx context.Context, n int) (*scalePass, error) {
	window := pick(r, 30*time.Second, 5*time.Second)
	interval := pick(r, 5*time.Second, time.Second)
	env := map[string]string{"SLUICE_MAX_INFLIGHT": strconv.Itoa(n), "SLUICE_MEDIA_RATE_LIMIT": "5000"}
	if r.o.Quick {
		env["SLUICE_POLL_INTERVAL"], env["SLUICE_POLL_FIRST"] = "1s", "250ms"
	}
	name := fmt.Sprintf("p3-%d", n)
	ss, err := r.startSession(ctx, name, env)
	if err != nil {
		return nil, err
	}
	defer ss.close(60 * time.Second)
	st, w, tr := ss.st, ss.w, ss.tr

	start := time.Now()
	ids := jobIDs(name, n)
	for i := 0; i < n; i += 1000 {
		if _, err := st.publishJobs(ctx, ids[i:min(i+1000, n)], p3Task); err != nil {
			return nil, err
		}
	}
	if err := tr.waitFor(ctx, 10*time.Minute, fmt.Sprintf("%d tasks submitted", n), func() bool { return tr.count("submitted") >= n }); err != nil {
		return nil, err
	}
	p := &scalePass{ramp: time.Since(start)}
	r.logf("P3: %d tasks submitted in %s", n, p.ramp.Round(time.Millisecond))
	// Three poll intervals bring every task to its steady interval.
	if err := backoff.Sleep(ctx, 3*interval); err != nil {
		return nil, err
	}
	s0, err := w.stats()
	if err != nil {
		return nil, err
	}
	req0 := statusRequests(st.media)
	t0 := time.Now()
	cpuProfile := make(chan error, 1)
	go func() { cpuProfile <- r.profile(ctx, w, "profile", window, name+"-cpu") }()
	if err := backoff.Sleep(ctx, window); err != nil {
		return nil, err
	}
	if p.end, err = w.stats(); err != nil {
		return nil, err
	}
	elapsed := time.Since(t0)
	p.reqPerSec = float64(statusRequests(st.media)-req0) / elapsed.Seconds()
	p.cpuPerSec = (p.end.CPU - s0.CPU).Seconds() / elapsed.Seconds()
	if p.goroutines, err = w.goroutines(ctx); err != nil {
		return nil, err
	}
	metrics := "http://" + w.httpAddr + "/metrics"
	if p.heap, err = metricValue(ctx, metrics, "go_memstats_heap_inuse_bytes"); err != nil {
		return nil, err
	}
	if p.stacks, err = metricValue(ctx, metrics, "go_memstats_stack_inuse_bytes"); err != nil {
		return nil, err
	}
	if ended, _ := tr.terminalCount(); ended > 0 {
		return nil, fmt.Errorf("%d long tasks ended during the measurement", ended)
	}
	return p, errors.Join(<-cpuProfile, r.profile(ctx, w, "heap", 0, name+"-heap"))
}
