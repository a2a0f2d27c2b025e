package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/backoff"
)

// longTask is the prompt directive of a task that outlasts any scenario.
const longTask = "[sim:duration=10m]"

// statusRequests sums the simulator's counters of task status queries,
// batch and single, whatever their answer.
func statusRequests(m *apisim.Media) int64 {
	var n int64
	for k, v := range m.Counters().Snapshot() {
		if strings.HasPrefix(k, "requests:"+apisim.EndpointTasks+":") || strings.HasPrefix(k, "requests:"+apisim.EndpointTask+":") {
			n += v
		}
	}
	return n
}

// polling measures P2: status requests per in-flight task per poll round
// with 100 and then 1,000 long tasks in flight on one worker. A poll round
// is SLUICE_POLL_INTERVAL, the interval every task settles at; polling
// each task on its own, as the vendor SDKs do, costs 1.0.
func (r *run) polling(ctx context.Context) (*Figure, error) {
	fig := &Figure{ID: "P2", Title: "polling efficiency", Target: "≤ 0.11 status requests per task per round (per-task polling: 1.0)"}
	interval := pick(r, 5*time.Second, time.Second)
	rounds := pick(r, 6, 4)
	env := map[string]string{
		"SLUICE_MAX_INFLIGHT":     "2000",
		"SLUICE_MEDIA_RATE_LIMIT": "1000",
		"SLUICE_POLL_INTERVAL":    interval.String(),
	}
	fig.Settings = []string{
		"SLUICE_MAX_INFLIGHT=2000 (default 256): 1,000 tasks must be in flight on one worker",
		"SLUICE_MEDIA_RATE_LIMIT=1000 (default 50 requests/s): only so that 1,000 submits do not take 20 s; steady polling stays far below either limit",
	}
	if r.o.Quick {
		env["SLUICE_POLL_FIRST"] = "250ms"
		fig.Settings = append(fig.Settings, "quick variant only: SLUICE_POLL_INTERVAL=1s and SLUICE_POLL_FIRST=250ms (defaults 5s and 1s), to reach steady state sooner")
	}
	ss, err := r.startSession(ctx, "p2", env)
	if err != nil {
		return fig, err
	}
	defer ss.close(30 * time.Second)
	st, w, tr := ss.st, ss.w, ss.tr

	worst := 0.0
	ids := jobIDs("p2", 1000)
	published := 0
	for _, n := range []int{100, 1000} {
		if _, err := st.publishJobs(ctx, ids[published:n], longTask); err != nil {
			return fig, err
		}
		published = n
		if err := tr.waitFor(ctx, 2*time.Minute, fmt.Sprintf("%d tasks submitted", n), func() bool { return tr.count("submitted") >= n }); err != nil {
			return fig, err
		}
		// A new task is polled after SLUICE_POLL_FIRST, then at doubling
		// intervals up to the cap: three intervals reach steady state.
		if err := backoff.Sleep(ctx, 3*interval); err != nil {
			return fig, err
		}
		req0, sum0, cnt0, err := r.pollCounters(ctx, st, w)
		if err != nil {
			return fig, err
		}
		t0 := time.Now()
		if err := backoff.Sleep(ctx, time.Duration(rounds)*interval); err != nil {
			return fig, err
		}
		req1, sum1, cnt1, err := r.pollCounters(ctx, st, w)
		if err != nil {
			return fig, err
		}
		elapsed := time.Since(t0)
		if ended, _ := tr.terminalCount(); ended > 0 {
			return fig, fmt.Errorf("%d long tasks ended during the measurement", ended)
		}
		perRound := float64(req1-req0) / (elapsed.Seconds() / interval.Seconds())
		ratio := perRound / float64(n)
		worst = max(worst, ratio)
		fig.row(fmt.Sprintf("%d tasks: requests per task per round", n), "**%.3f**", ratio)
		fig.row(fmt.Sprintf("%d tasks: status requests", n), "%d in %s (%.1f rounds of %s), %.1f per round", req1-req0, elapsed.Round(time.Millisecond), elapsed.Seconds()/interval.Seconds(), interval, perRound)
		if cnt1 > cnt0 {
			fig.row(fmt.Sprintf("%d tasks: mean task ids per batch query", n), "%.2f (of at most 10)", (sum1-sum0)/(cnt1-cnt0))
		}
		r.logf("P2 %d tasks: %.3f requests per task per round", n, ratio)
	}
	fig.Measured = fmt.Sprintf("%.3f (worst of 100 and 1,000 tasks)", worst)
	fig.Met = worst <= 0.11
	fig.Notes = append(fig.Notes, fmt.Sprintf(
		"One worker process; 100 video jobs whose simulated task runs 10 minutes, then 900 more. After every task is "+
			"submitted and three poll intervals have passed (steady state), the simulator's counters of status queries "+
			"(batch and single) are read %d poll intervals apart. A round is one SLUICE_POLL_INTERVAL (%s), the interval "+
			"every task's polling settles at, so a poller querying each task alone scores 1.0 and perfectly full batches "+
			"of 10 score 0.1. The mean batch size comes from the worker's sluice_poll_batch_size histogram.", rounds, interval))
	return fig, nil
}

// pollCounters reads the simulator's status query count and the worker's
// batch size histogram sum and count.
func (r *run) pollCounters(ctx context.Context, st *stack, w *worker) (requests int64, sum, count float64, err error) {
	requests = statusRequests(st.media)
	url := "http://" + w.httpAddr + "/metrics"
	if sum, err = metricValue(ctx, url, "sluice_poll_batch_size_sum"); err != nil {
		return 0, 0, 0, err
	}
	count, err = metricValue(ctx, url, "sluice_poll_batch_size_count")
	return requests, sum, count, err
}
