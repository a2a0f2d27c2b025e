package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/backoff"
)

// latency measures P5: enqueue → terminal event, one job at a time, for
// sluice and, as a reference, for the floor pipeline. The simulator's task
// time is 0, so nothing is subtracted.
func (r *run) latency(ctx context.Context) (*Figure, error) {
	fig := &Figure{ID: "P5", Title: "latency, enqueue → terminal event", Target: "median ≤ 20 ms", Settings: throughputSettings}
	n := pick(r, 300, 60)
	slTimeline, flTimeline := newTimeline(), newTimeline()
	sl, err := r.latencyPass(ctx, "p5-sluice", "sluice", n, slTimeline)
	if err != nil {
		return fig, err
	}
	fl, err := r.latencyPass(ctx, "p5-floor", "floor", n, flTimeline)
	if err != nil {
		return fig, err
	}
	med, p99 := quantile(sl, 0.5), quantile(sl, 0.99)
	fig.Measured = fmt.Sprintf("median %s, p99 %s", ms(med), ms(p99))
	fig.Met = med <= 20*time.Millisecond
	fig.row("sluice median", "%s", ms(med))
	fig.row("sluice p99", "%s", ms(p99))
	fig.row("sluice min / max", "%s / %s", ms(sl[0]), ms(sl[len(sl)-1]))
	fig.row("floor median (same run)", "%s", ms(quantile(fl, 0.5)))
	fig.row("floor p99 (same run)", "%s", ms(quantile(fl, 0.99)))
	flMed := quantile(fl, 0.5)
	fig.row("sluice median − floor median", "%s", ms(med-flMed))
	// The floor queries the moment its submit is answered; sluice waits
	// SLUICE_POLL_FIRST, as it must for a real video task (never terminal
	// at its submit). The second ratio charges the floor the same wait.
	firstPoll, _ := time.ParseDuration(throughputEnv["SLUICE_POLL_FIRST"])
	fig.row("sluice / floor, medians", "%.2f×", float64(med)/float64(flMed))
	fig.row("sluice / (floor + the first poll's wait), medians", "%.2f×", float64(med)/float64(flMed+firstPoll))
	slTimeline.rows(fig, "sluice")
	flTimeline.rows(fig, "floor")
	fig.Notes = append(fig.Notes, fmt.Sprintf(
		"%d video jobs one after the other (the next is published 20 ms after the last one's terminal event arrived, so "+
			"that job's ack and event deliveries are stamped as its own; the first "+
			"5 warm connections up and are not counted), simulator task time 0 and a 64 KiB result, so nothing is subtracted "+
			"for the task. The time runs from the publish call to the terminal event's arrival at a subscriber in the harness. "+
			"The floor pipeline of P1 is timed the same way in the same run. Each timeline row is a step's median time "+
			"after the publish (and after the step above it), stamped in the harness as the NATS server, the simulator or "+
			"the store saw it: a state write by its status, the simulator's and the store's requests on arrival and answer.", n))
	return fig, nil
}

// latencyPass times n jobs, one at a time, through the floor or a worker,
// and returns the latencies sorted; tl stamps their steps.
func (r *run) latencyPass(ctx context.Context, name, who string, n int, tl *timeline) ([]time.Duration, error) {
	st, err := newStack(ctx, r.scenarioDir(name), stackOptions{Media: apisim.MediaConfig{ResultSize: 64 << 10}, Timeline: tl})
	if err != nil {
		return nil, err
	}
	defer st.close()
	if who == "floor" {
		p, err := r.startFloor(ctx, st, name, 256)
		if err != nil {
			return nil, err
		}
		defer p.stop(10 * time.Second)
	} else {
		w, err := r.startWorker(ctx, st, name, throughputEnv)
		if err != nil {
			return nil, err
		}
		defer w.stop(30 * time.Second)
	}
	lat, err := st.oneByOne(ctx, name, n, 5)
	if err != nil {
		return nil, err
	}
	r.logf("P5 %s: median %s p99 %s", who, ms(quantile(lat, 0.5)), ms(quantile(lat, 0.99)))
	return lat, nil
}

// oneByOne publishes warmup+n video jobs whose ids start with name, each
// when the last one's terminal event has arrived, and returns the n
// latencies after the warm-up (publish call → terminal event), sorted.
func (s *stack) oneByOne(ctx context.Context, name string, n, warmup int) ([]time.Duration, error) {
	return s.oneByOneWith(ctx, name, n, warmup, func(ctx context.Context, id string) (time.Time, error) {
		at, err := s.publishJobs(ctx, []string{id}, instant)
		return at[id], err
	})
}

// oneByOneWith is oneByOne with each job submitted by submit, which
// returns when it started submitting.
func (s *stack) oneByOneWith(ctx context.Context, name string, n, warmup int, submit func(context.Context, string) (time.Time, error)) ([]time.Duration, error) {
	tr, err := s.track(name)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	var lat []time.Duration
	if s.timeline != nil {
		defer s.timeline.end()
	}
	for i, id := range jobIDs(name, n+warmup) {
		if s.timeline != nil {
			if i == warmup {
				s.timeline.forget()
			}
			// The last job's tail (its ack, its event's deliveries)
			// comes after its terminal event: let it land in its own
			// window, not in this job's.
			if err := backoff.Sleep(ctx, timelineSettle); err != nil {
				return nil, err
			}
			s.timeline.begin(time.Now())
		}
		at, err := submit(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := tr.waitEnded(ctx, i+1, time.Minute); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		if _, failed := tr.terminalCount(); failed > 0 {
			return nil, fmt.Errorf("%s: job did not succeed", id)
		}
		end, _ := tr.at("succeeded", id)
		if i >= warmup {
			lat = append(lat, end.Sub(at))
		}
	}
	slices.Sort(lat)
	return lat, nil
}

// timelineSettle is the pause between one job's terminal event and the
// next publish when a timeline stamps the jobs' steps.
const timelineSettle = 20 * time.Millisecond

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
