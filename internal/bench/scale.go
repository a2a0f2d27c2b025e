package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// scale measures P3: many long tasks in flight on one worker process, with
// its peak and steady RSS, goroutines and CPU per second at steady state.
func (r *run) scale(ctx context.Context) (*Figure, error) {
	n := pick(r, 10000, 2000)
	window := pick(r, 30*time.Second, 5*time.Second)
	interval := pick(r, 5*time.Second, time.Second)
	fig := &Figure{ID: "P3", Title: fmt.Sprintf("scale, %d long tasks in flight", n), Target: "peak RSS ≤ 150 MiB"}
	env := map[string]string{
		"SLUICE_MAX_INFLIGHT":     strconv.Itoa(n),
		"SLUICE_MEDIA_RATE_LIMIT": "2000",
	}
	fig.Settings = []string{
		fmt.Sprintf("SLUICE_MAX_INFLIGHT=%d (default 256): every task in flight on one worker", n),
		"SLUICE_MEDIA_RATE_LIMIT=2000 (default 50 requests/s): 10,000 tasks polled every 5 s in batches of 10 need 200 requests/s, and 10,000 submits would take over 3 minutes at 50/s",
	}
	if r.o.Quick {
		env["SLUICE_POLL_INTERVAL"], env["SLUICE_POLL_FIRST"] = "1s", "250ms"
		fig.Settings = append(fig.Settings, "quick variant only: SLUICE_POLL_INTERVAL=1s and SLUICE_POLL_FIRST=250ms (defaults 5s and 1s), to reach steady state sooner")
	}
	ss, err := r.startSession(ctx, "p3", env)
	if err != nil {
		return fig, err
	}
	defer ss.close(60 * time.Second)
	st, w, tr := ss.st, ss.w, ss.tr

	start := time.Now()
	ids := jobIDs("p3", n)
	for i := 0; i < n; i += 1000 {
		if _, err := st.publishJobs(ctx, ids[i:min(i+1000, n)], longTask); err != nil {
			return fig, err
		}
	}
	if err := tr.waitFor(ctx, 5*time.Minute, fmt.Sprintf("%d tasks submitted", n), func() bool { return tr.count("submitted") >= n }); err != nil {
		return fig, err
	}
	ramp := time.Since(start)
	r.logf("P3: %d tasks submitted in %s", n, ramp.Round(time.Millisecond))
	// Three poll intervals bring every task to its steady interval.
	if err := backoff.Sleep(ctx, 3*interval); err != nil {
		return fig, err
	}
	s0, err := w.stats()
	if err != nil {
		return fig, err
	}
	req0 := statusRequests(st.media)
	t0 := time.Now()
	cpuProfile := make(chan error, 1)
	go func() { cpuProfile <- r.profile(ctx, w, "profile", window, "p3-cpu") }()
	if err := backoff.Sleep(ctx, window); err != nil {
		return fig, err
	}
	s1, err := w.stats()
	if err != nil {
		return fig, err
	}
	elapsed := time.Since(t0)
	req1 := statusRequests(st.media)
	g, err := w.goroutines(ctx)
	if err != nil {
		return fig, err
	}
	heap, err := metricValue(ctx, "http://"+w.httpAddr+"/metrics", "go_memstats_heap_inuse_bytes")
	if err != nil {
		return fig, err
	}
	stacks, err := metricValue(ctx, "http://"+w.httpAddr+"/metrics", "go_memstats_stack_inuse_bytes")
	if err != nil {
		return fig, err
	}
	if ended, _ := tr.terminalCount(); ended > 0 {
		return fig, fmt.Errorf("%d long tasks ended during the measurement", ended)
	}
	if err := errors.Join(<-cpuProfile, r.profile(ctx, w, "heap", 0, "p3-heap")); err != nil {
		return fig, err
	}
	cpuPerSec := (s1.CPU - s0.CPU).Seconds() / elapsed.Seconds()
	fig.Measured = fmt.Sprintf("peak RSS %s", mib(s1.HWM))
	fig.Met = s1.HWM <= 150<<20
	fig.row("peak RSS (VmHWM, whole run)", "%s", mib(s1.HWM))
	fig.row("RSS at steady state (VmRSS)", "%s", mib(s1.RSS))
	fig.row("Go heap in use at steady state", "%s", mib(uint64(heap)))
	fig.row("goroutine stacks at steady state", "%s (%.1f KiB per task)", mib(uint64(stacks)), stacks/1024/float64(n))
	fig.row("RSS per task in flight", "%.1f KiB", float64(s1.RSS)/1024/float64(n))
	fig.row("goroutines", "%.0f (%.2f per task)", g, g/float64(n))
	fig.row("CPU at steady state", "%.1f ms per second (%.1f%% of one core)", cpuPerSec*1000, cpuPerSec*100)
	fig.row("status requests at steady state", "%.1f per second", float64(req1-req0)/elapsed.Seconds())
	fig.row("time to submit every task", "%s", ramp.Round(100*time.Millisecond))
	fig.Notes = append(fig.Notes, fmt.Sprintf(
		"One worker process holds %d video jobs whose simulated tasks run 10 minutes (poll interval %s, heartbeats "+
			"every 15 s). After every task was submitted and three poll intervals more, CPU time is read from "+
			"/proc/<pid>/stat %s apart; RSS from /proc/<pid>/status; goroutines, heap and stacks from the worker's /metrics.",
		n, interval, window))
	return fig, nil
}
