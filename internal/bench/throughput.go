package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/contract"
)

// instant is the prompt directive of a task that ends at once.
const instant = "[sim:duration=0s]"

// throughputEnv is the worker's environment for P1 and P5.
var throughputEnv = map[string]string{
	"SLUICE_POLL_FIRST":       "5ms",
	"SLUICE_MEDIA_RATE_LIMIT": "100000",
}

var throughputSettings = []string{
	"SLUICE_POLL_FIRST=5ms (default 1s): the simulator answers instantly, and with the default every job would wait a second for its first poll, which measures the setting, not the machinery; the 5 ms are part of every sluice figure",
	"SLUICE_MEDIA_RATE_LIMIT=100000 (default 50 requests/s): the default client-side limit alone would cap the worker at about 45 jobs/s; the floor has no limiter",
}

// pass is one timed batch of jobs through a pipeline.
type pass struct {
	name    string
	jobs    int
	elapsed time.Duration
	failed  int
	// cpu is the CPU time of the pipeline's process (worker or floor) and
	// of the harness process (NATS, the S3 store, the simulator) during
	// the pass.
	cpu, harnessCPU time.Duration
	// kvWrites counts the writes to SLUICE_STATE during the pass.
	kvWrites uint64
}

// cpuPerJob is the CPU time of both processes per job.
func (p pass) cpuPerJob() time.Duration { return (p.cpu + p.harnessCPU) / time.Duration(p.jobs) }

func (p pass) rate() float64 { return float64(p.jobs) / p.elapsed.Seconds() }

// throughput measures P1: jobs/s of sluice against the floor pipeline, in
// rounds that run each pipeline once and rotate which goes first, so that
// the drift of a noisy machine falls on every side. The headline is the
// median of the rounds' ratios; CPU time per job, which the noise moves
// less than time, is reported beside it.
func (r *run) throughput(ctx context.Context) (*Figure, error) {
	fig := &Figure{ID: "P1", Title: "end-to-end throughput", Target: "≥ 0.8× the floor", Settings: throughputSettings}
	// Many short pairs rather than a few long ones: this machine's noise
	// (other tenants, CPU steal) comes in bursts of seconds, and a pair
	// whose two passes run seconds apart sees the same burst.
	n := pick(r, 800, 150)
	pairs := pick(r, 12, 2)
	pipelines := []string{"floor", "sluice"}
	passes := map[string][]pass{}
	for i := range pairs {
		for k := range pipelines {
			who := pipelines[(i+k)%len(pipelines)]
			p, err := r.throughputPass(ctx, fmt.Sprintf("p1-%s-%d", who, i), who, n)
			if err != nil {
				return fig, err
			}
			if p.failed > 0 {
				return fig, fmt.Errorf("%s: %d jobs did not succeed", p.name, p.failed)
			}
			r.logf("P1 %s pass %d: %d jobs in %s = %.0f jobs/s; CPU/job %s (process %s, harness %s)", who, i, p.jobs,
				p.elapsed.Round(time.Millisecond), p.rate(), p.cpuPerJob(), p.cpu/time.Duration(p.jobs), p.harnessCPU/time.Duration(p.jobs))
			passes[who] = append(passes[who], p)
		}
	}
	type summary struct {
		ratios, rates []float64
		cpu, proc     []time.Duration
	}
	sums := map[string]*summary{}
	for _, who := range pipelines {
		sm := &summary{}
		for i, p := range passes[who] {
			sm.ratios = append(sm.ratios, p.rate()/passes["floor"][i].rate())
			sm.rates = append(sm.rates, p.rate())
			sm.cpu = append(sm.cpu, p.cpuPerJob())
			sm.proc = append(sm.proc, p.cpu/time.Duration(p.jobs))
		}
		sums[who] = sm
	}
	for i := range pairs {
		f, s := passes["floor"][i], passes["sluice"][i]
		fig.row(fmt.Sprintf("pair %d", i+1), "floor %.0f, sluice %.0f jobs/s (**%.2f×**)", f.rate(), s.rate(), s.rate()/f.rate())
	}
	fl, sl := sums["floor"], sums["sluice"]
	ratio := median(sl.ratios)
	fig.Measured = fmt.Sprintf("%.2f× (median of %d pairs)", ratio, pairs)
	fig.Met = ratio >= 0.8
	fig.row("median throughput", "floor %.0f jobs/s, sluice %.0f jobs/s", median(fl.rates), median(sl.rates))
	fc, sc := median(fl.cpu), median(sl.cpu)
	fig.row("median CPU per job, all processes", "floor %s, sluice %s: floor/sluice **%.2f×**", ms(fc), ms(sc), fc.Seconds()/sc.Seconds())
	fig.row("median CPU per job, pipeline process only", "floor %s, sluice worker %s", ms(median(fl.proc)), ms(median(sl.proc)))
	fig.row("checkpoint writes per sluice job (SLUICE_STATE)", "%.2f", float64(passes["sluice"][0].kvWrites)/float64(n))
	fig.Notes = append(fig.Notes, fmt.Sprintf(
		"Each pass publishes %d video jobs (simulator task time 0, one 64 KiB result each) to a fresh embedded NATS "+
			"and S3 store and times the first publish to the last terminal event; each of %d rounds runs the floor and sluice "+
			"once, alternating which goes first, and a pair's ratio divides by that "+
			"round's floor. The floor is a process of the bench binary with the same I/O per job (pull for free slots, "+
			"submit, one batch query, download, PutObject, publish the event, ack), %d jobs at once like SLUICE_MAX_INFLIGHT, "+
			"and no checkpoint, progress event, retry, limiter or log line. Both run as separate processes against the same "+
			"servers in the harness process. CPU per job adds the pipeline process's CPU time and the harness's (NATS, the "+
			"store, the simulator) over the pass. On this machine the embedded store is the largest cost of both "+
			"pipelines (it writes every object under one lock).", n, pairs, 256))
	return fig, nil
}

// throughputPass times n jobs through the floor or a sluice worker.
func (r *run) throughputPass(ctx context.Context, name, who string, n int) (pass, error) {
	st, err := newStack(ctx, r.scenarioDir(name), stackOptions{Media: apisim.MediaConfig{ResultSize: 64 << 10}})
	if err != nil {
		return pass{}, err
	}
	defer st.close()
	var proc *process
	var w *worker
	env := throughputEnv
	if who == "floor" {
		if proc, err = r.startFloor(ctx, st, name, 256); err != nil {
			return pass{}, err
		}
	} else {
		if w, err = r.startWorker(ctx, st, name, env); err != nil {
			return pass{}, err
		}
		proc = w.process
	}
	defer proc.stop(30 * time.Second)
	tr, err := st.track(name)
	if err != nil {
		return pass{}, err
	}
	defer tr.close()
	proc0, self0, err := cpuTimes(proc)
	if err != nil {
		return pass{}, err
	}
	cpuProfile := make(chan error, 1)
	if w != nil {
		go func() { cpuProfile <- r.profile(ctx, w, "profile", 2*time.Second, name+"-cpu") }()
	} else {
		cpuProfile <- nil
	}
	start := time.Now()
	if _, err := st.publishJobs(ctx, jobIDs(name, n), instant); err != nil {
		return pass{}, err
	}
	if err := tr.waitEnded(ctx, n, 5*time.Minute); err != nil {
		return pass{}, fmt.Errorf("%s: %w", name, err)
	}
	proc1, self1, err := cpuTimes(proc)
	if err != nil {
		return pass{}, err
	}
	if err := <-cpuProfile; err != nil {
		return pass{}, err
	}
	_, failed := tr.terminalCount()
	writes, err := st.stateWrites(ctx)
	if err != nil {
		return pass{}, err
	}
	return pass{
		name: name, jobs: n, elapsed: tr.lastTerminal().Sub(start), failed: failed,
		cpu: proc1 - proc0, harnessCPU: self1 - self0, kvWrites: writes,
	}, nil
}

// median returns the median of xs (the mean of the middle two for an even
// count); xs is reordered.
func median[T float64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

// cpuTimes reads the CPU time of p and of the harness process.
func cpuTimes(p *process) (proc, harness time.Duration, err error) {
	ps, err := p.stats()
	if err != nil {
		return 0, 0, err
	}
	hs, err := readProcStats(os.Getpid())
	return ps.CPU, hs.CPU, err
}

// stateWrites counts the writes to SLUICE_STATE since the stack started.
func (s *stack) stateWrites(ctx context.Context) (uint64, error) {
	kv, err := s.js.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		return 0, err
	}
	status, err := kv.Status(ctx)
	if err != nil {
		return 0, err
	}
	if bs, ok := status.(*jetstream.KeyValueBucketStatus); ok {
		return bs.StreamInfo().State.LastSeq, nil
	}
	return 0, fmt.Errorf("%s: no stream status", contract.StateBucket)
}
