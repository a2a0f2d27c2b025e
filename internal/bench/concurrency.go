package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/quota"
)

// concurrencySample is the fleet and the account at one moment of Q2.
type concurrencySample struct {
	at        time.Duration // since the jobs were published
	effective int           // the board's effective media limit
	refused   int64         // submits answered 433/10007 so far
	submits   int64         // submits answered so far (accepted or refused)
	ended     int           // jobs with a terminal event
}

// concurrency measures Q2: two workers configured for 20 media tasks at
// once against an account that allows 8 and answers 433/10007 above it.
// The fleet's effective limit, read off the quota board every 200 ms,
// settles when it stays within one of the account's limit (the step past
// it being a probe) to the end of the backlog; the refused share is taken
// from then on.
func (r *run) concurrency(ctx context.Context) (*Figure, error) {
	const account, configured = 8, 20
	n := pick(r, 240, 60)
	taskTime := pick(r, 10*time.Second, 3*time.Second)
	fig := &Figure{ID: "Q2", Title: fmt.Sprintf("concurrency back-pressure, 2 workers, %d jobs", n),
		Target: "settles within 60 s at an effective limit of 7–8; under 2 % of submits refused once settled"}
	env := map[string]string{
		"SLUICE_FLEET_MEDIA_TASKS": strconv.Itoa(configured),
		"SLUICE_POLL_INTERVAL":     "500ms",
	}
	fig.Settings = []string{
		fmt.Sprintf("SLUICE_FLEET_MEDIA_TASKS=%d on both workers (default: no limit), above the account's %d", configured, account),
		"SLUICE_POLL_INTERVAL=500ms (default 5s): a lease ends soon after its task, so the leases in use track the account's count",
	}
	st, err := newStack(ctx, r.scenarioDir("q2"), stackOptions{Media: apisim.MediaConfig{
		ResultSize: 1 << 10, TaskDuration: taskTime, ConcurrencyLimit: account}})
	if err != nil {
		return fig, err
	}
	defer st.close()
	for i := range 2 {
		w, err := r.startWorker(ctx, st, fmt.Sprintf("q2-worker-%d", i), env)
		if err != nil {
			return fig, err
		}
		defer w.stop(30 * time.Second)
	}
	tr, err := st.track("q2")
	if err != nil {
		return fig, err
	}
	defer tr.close()
	start := time.Now()
	if _, err := st.publishJobs(ctx, jobIDs("q2", n), ""); err != nil {
		return fig, err
	}
	samples := make(chan []concurrencySample, 1)
	sctx, stopSampling := context.WithCancel(ctx)
	go func() { samples <- sampleConcurrency(sctx, st, tr, start) }()
	err = tr.waitEnded(ctx, n, time.Duration(n)*taskTime)
	stopSampling()
	ss := <-samples
	if err != nil {
		return fig, err
	}
	ended, failed := tr.terminalCount()
	twice := 0
	c := st.media.Counters()
	for k, v := range c.Snapshot() {
		if strings.HasPrefix(k, "submits:") && v > 1 {
			twice++
		}
	}
	// The backlog lasts while more jobs are left than the configured
	// limit: past that the fleet cannot fill the account any more.
	busy := ss
	for i, s := range ss {
		if n-s.ended <= configured {
			busy = ss[:i]
			break
		}
	}
	set := settledFrom(busy, account)
	fig.row("jobs ended / failed / submitted twice", "%d / %d / %d", ended, failed, twice)
	fig.row("submits refused 433/10007, whole run", "%d of %d", c.Get("requests:video.submit:433"), c.Get("requests:video.submit:433")+c.Get("requests:video.submit:200"))
	fig.row("highest tasks upstream at once (simulator)", "%d (account's limit %d)", c.PeakRunning(), account)
	if set < 0 {
		fig.Measured = "never settled"
		fig.row("effective limit over the backlog", "%s", effectiveTrace(busy))
		return fig, nil
	}
	s0, s1 := busy[set], busy[len(busy)-1]
	mode, mean := effectiveMode(busy[set:])
	share := 0.0
	if d := s1.submits - s0.submits; d > 0 {
		share = float64(s1.refused-s0.refused) / float64(d)
	}
	fig.row("time to settle (from publishing)", "%s", s0.at.Round(100*time.Millisecond))
	fig.row("effective limit once settled: most of the time / mean", "%d / %.2f", mode, mean)
	fig.row("submits refused once settled", "%d of %d (%.2f %%), over %s", s1.refused-s0.refused, s1.submits-s0.submits, 100*share,
		(s1.at - s0.at).Round(time.Second))
	fig.row("effective limit over the backlog", "%s", effectiveTrace(busy))
	fig.Measured = fmt.Sprintf("settled in %s at %d (mean %.2f), %.2f %% refused", s0.at.Round(time.Second), mode, mean, 100*share)
	fig.Met = s0.at <= time.Minute && mode >= account-1 && mode <= account && share < 0.02 && ended == n && failed == 0 && twice == 0
	fig.Notes = []string{
		fmt.Sprintf("The simulator allows %d media tasks pending or running at once (tasks take %s) and answers a submit past that "+
			"HTTP 433 {\"code\":\"10007\"}, creating nothing. Settled is the first moment after which the effective limit stays "+
			"within %d–%d (a step to %d is a probe) until fewer than %d jobs are left.", account, taskTime, account-1, account+1, account+1, configured),
	}
	return fig, nil
}

// sampleConcurrency reads the board and the simulator every 200 ms until
// ctx ends.
func sampleConcurrency(ctx context.Context, st *stack, tr *tracker, start time.Time) []concurrencySample {
	var out []concurrencySample
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		s := concurrencySample{at: time.Since(start)}
		if sts, err := quota.Read(ctx, st.js, time.Time{}); err == nil {
			for _, q := range sts {
				if q.Resource == quota.Media {
					s.effective = q.Effective
				}
			}
		}
		c := st.media.Counters()
		s.refused = c.Get("requests:video.submit:433")
		s.submits = s.refused + c.Get("requests:video.submit:200")
		s.ended, _ = tr.terminalCount()
		if s.effective > 0 {
			out = append(out, s)
		}
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
	}
}

// settledFrom is the index of the first sample after which the effective
// limit stays within one of account; -1 when it never does.
func settledFrom(ss []concurrencySample, account int) int {
	from := -1
	for i, s := range ss {
		switch in := s.effective >= account-1 && s.effective <= account+1; {
		case !in:
			from = -1
		case from < 0:
			from = i
		}
	}
	return from
}

// effectiveMode is the effective limit held longest over ss (samples are
// evenly spaced), and its mean.
func effectiveMode(ss []concurrencySample) (mode int, mean float64) {
	count := map[int]int{}
	sum := 0
	for _, s := range ss {
		count[s.effective]++
		sum += s.effective
	}
	for v, k := range count {
		if k > count[mode] || k == count[mode] && v < mode {
			mode = v
		}
	}
	return mode, float64(sum) / float64(max(len(ss), 1))
}

// effectiveTrace lists each change of the effective limit with its time.
func effectiveTrace(ss []concurrencySample) string {
	var parts []string
	last := -1
	for _, s := range ss {
		if s.effective != last {
			parts = append(parts, fmt.Sprintf("%d@%.1fs", s.effective, s.at.Seconds()))
			last = s.effective
		}
	}
	return strings.Join(parts, " ")
}
