package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// boardOps is sluice_quota_board_ops_total summed over workers, by
// "key op outcome".
type boardOps map[string]float64

// sum adds the series whose key, op and outcome match (""
// matches any).
func (o boardOps) sum(key, op, outcome string) float64 {
	var n float64
	for k, v := range o {
		f := strings.Fields(k)
		if len(f) == 3 && (key == "" || strings.HasPrefix(f[0], key)) && (op == "" || f[1] == op) && (outcome == "" || f[2] == outcome) {
			n += v
		}
	}
	return n
}

// fleetCost is what a fleet of workers spent over a stretch: summed over
// its workers' /proc and /metrics, and the NATS server's /proc.
type fleetCost struct {
	workerCPU, natsCPU time.Duration
	ops                boardOps
}

func (c fleetCost) minus(b fleetCost) fleetCost {
	d := fleetCost{workerCPU: c.workerCPU - b.workerCPU, natsCPU: c.natsCPU - b.natsCPU, ops: boardOps{}}
	for k, v := range c.ops {
		d.ops[k] = v - b.ops[k]
	}
	return d
}

// fleetSize is one phase of F1: workers workers through n jobs.
type fleetSize struct {
	workers, ended, failed, twice, peak int
	took                                time.Duration
	// run is the cost from publish to the last terminal event; idle the
	// cost of idleFor after it, with nothing to do.
	run, idle fleetCost
	idleFor   time.Duration
}

// perJob is v per job of p.
func (p *fleetSize) perJob(v float64) float64 { return v / float64(max(p.ended, 1)) }

// fleetScale measures F1: the cost per job of sharing the fleet quotas
// with 16 worker processes against 3, same jobs and same limits, each
// phase on its own NATS server in a process of its own.
func (r *run) fleetScale(ctx context.Context) (*Figure, error) {
	n, tasks, rate := pick(r, 300, 24), pick(r, 10, 4), pick(r, 20, 10)
	sizes := pick(r, []int{3, 16}, []int{3, 6})
	fig := &Figure{ID: "F1", Title: fmt.Sprintf("fleet quota cost, %d workers against %d, %d jobs", sizes[1], sizes[0], n),
		Target: "board operations, CAS conflicts and CPU per job flat in the number of workers (ratio ≤ 1.5)"}
	env := map[string]string{
		"SLUICE_FLEET_MEDIA_TASKS": strconv.Itoa(tasks),
		"SLUICE_FLEET_MEDIA_RATE":  strconv.Itoa(rate),
		"SLUICE_MAX_INFLIGHT":      "4",
		"GOMAXPROCS":               "1",
	}
	fig.Settings = []string{
		fmt.Sprintf("SLUICE_FLEET_MEDIA_TASKS=%d, SLUICE_FLEET_MEDIA_RATE=%d on every worker (defaults: no limit)", tasks, rate),
		"SLUICE_MAX_INFLIGHT=4 (default 256) and GOMAXPROCS=1: many processes on 2 cores",
	}
	load0 := loadAvg()
	var phases []*fleetSize
	for _, w := range sizes {
		p, err := r.fleetSizePhase(ctx, fmt.Sprintf("f1w%d", w), w, n, env)
		if err != nil {
			return fig, err
		}
		phases = append(phases, p)
	}
	fig.row("load average (1, 5, 15 min) before / after", "%s / %s", load0, loadAvg())
	fleetScaleRows(fig, phases, tasks)
	fig.Notes = fleetScaleNotes
	return fig, nil
}

// fleetScaleRows reports each phase and the ratios of the larger fleet's
// costs per job to the smaller's.
func fleetScaleRows(fig *Figure, ps []*fleetSize, tasks int) {
	type cost struct {
		label string
		of    func(*fleetSize) float64
	}
	costs := []cost{
		{"board reads per job", func(p *fleetSize) float64 { return p.perJob(p.run.ops.sum("leases", "read", "")) }},
		{"board CAS writes per job", func(p *fleetSize) float64 { return p.perJob(p.run.ops.sum("leases", "write", "")) }},
		{"board CAS conflicts per job", func(p *fleetSize) float64 { return p.perJob(p.run.ops.sum("leases", "write", "conflict")) }},
		{"rate window reads + CAS writes per job", func(p *fleetSize) float64 { return p.perJob(p.run.ops.sum("rate", "", "")) }},
		{"rate window CAS conflicts per job", func(p *fleetSize) float64 { return p.perJob(p.run.ops.sum("rate", "write", "conflict")) }},
		{"alive pings per job", func(p *fleetSize) float64 { return p.perJob(p.run.ops.sum("alive", "", "")) }},
		{"worker CPU per job, ms", func(p *fleetSize) float64 { return p.perJob(ms64(p.run.workerCPU)) }},
		{"nats-server CPU per job, ms", func(p *fleetSize) float64 { return p.perJob(ms64(p.run.natsCPU)) }},
	}
	met := true
	var measured []string
	for _, p := range ps {
		pre := fmt.Sprintf("%d workers: ", p.workers)
		fig.row(pre+"jobs ended / failed / submitted twice", "%d / %d / %d", p.ended, p.failed, p.twice)
		fig.row(pre+"highest tasks upstream at once (simulator)", "%d (limit %d)", p.peak, tasks)
		fig.row(pre+"publish to last terminal event", "%s", p.took.Round(100*time.Millisecond))
		for _, c := range costs {
			fig.row(pre+c.label, "%.2f", c.of(p))
		}
		idle := p.idleFor.Seconds() * float64(p.workers)
		fig.row(pre+"idle, per worker per second: board reads / writes / alive pings", "%.2f / %.2f / %.2f",
			p.idle.ops.sum("leases", "read", "")/idle, p.idle.ops.sum("leases", "write", "")/idle, p.idle.ops.sum("alive", "", "")/idle)
		fig.row(pre+"idle, per worker per second: worker CPU / nats-server CPU", "%.2f ms / %.2f ms",
			ms64(p.idle.workerCPU)/idle, ms64(p.idle.natsCPU)/idle)
		met = met && p.ended > 0 && p.peak <= tasks && p.twice == 0
	}
	small, big := ps[0], ps[len(ps)-1]
	for _, c := range costs {
		ratio := c.of(big) / max(c.of(small), 1e-9)
		fig.row(fmt.Sprintf("%s: %d workers / %d", c.label, big.workers, small.workers), "%.2f×", ratio)
		if c.label == "board CAS writes per job" || c.label == "board CAS conflicts per job" || strings.HasPrefix(c.label, "worker CPU") || strings.HasPrefix(c.label, "nats") {
			measured = append(measured, fmt.Sprintf("%s %.2f×", strings.TrimSuffix(c.label, " per job"), ratio))
			met = met && (ratio <= 1.5 || c.of(big) < 0.05)
		}
	}
	fig.Measured, fig.Met = fmt.Sprintf("per job, %d workers / %d: ", big.workers, small.workers)+strings.Join(measured, ", "), met
}

var fleetScaleNotes = []string{
	"Each phase has its own NATS server (\"bench natsserve\", a process of its own, so its CPU is read from /proc), S3 store " +
		"and simulator (tasks take 2 s). Costs are taken from after every worker is ready to the last terminal event: worker " +
		"CPU summed over the workers' /proc, board operations summed over their sluice_quota_board_ops_total; then over 10 s " +
		"(quick: 3 s) with nothing to do, for the costs each worker pays per second whatever the jobs.",
	"A job costs about one lease grant and one release on the board (per job), a share of the rate windows' claims (per " +
		"request) and the renewals of its lease (twice per AckWait while it runs); a worker costs, per second, a read of each " +
		"board every 2 s when idle (every 250 ms while it waits for a lease), a ping of every other worker holding leases " +
		"every second (per worker, the holders of the fleet: n workers ping n·(n−1) times a second) and its consumer's pulls.",
}

// fleetSizePhase runs n jobs through workers worker processes on a stack
// of its own, and reads their costs.
func (r *run) fleetSizePhase(ctx context.Context, name string, workers, n int, env map[string]string) (*fleetSize, error) {
	dir := r.scenarioDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	np, err := startProcess(name+"-nats", r.o.Self, []string{"natsserve", "-dir", filepath.Join(dir, "nats")}, nil, dir)
	if err != nil {
		return nil, err
	}
	defer np.stop(10 * time.Second)
	natsURL, err := np.line(ctx, "READY", 30*time.Second)
	if err != nil {
		return nil, err
	}
	st, err := newStack(ctx, dir, stackOptions{NATSURL: natsURL, Media: apisim.MediaConfig{ResultSize: 1 << 10, TaskDuration: 2 * time.Second}})
	if err != nil {
		return nil, err
	}
	defer st.close()
	var ws []*worker
	defer func() {
		for _, w := range ws {
			w.stop(30 * time.Second)
		}
	}()
	for i := range workers {
		w, err := r.startWorker(ctx, st, fmt.Sprintf("%s-worker-%d", name, i), env)
		if err != nil {
			return nil, err
		}
		ws = append(ws, w)
	}
	tr, err := st.track(name)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	return r.measureFleet(ctx, st, tr, ws, np, name, n)
}

// measureFleet publishes n jobs to the ready fleet ws and reads its costs
// over the run and over an idle stretch after it.
func (r *run) measureFleet(ctx context.Context, st *stack, tr *tracker, ws []*worker, np *process, name string, n int) (*fleetSize, error) {
	c0, err := readFleetCost(ctx, ws, np)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := st.publishJobs(ctx, jobIDs(name, n), ""); err != nil {
		return nil, err
	}
	if err := tr.waitEnded(ctx, n, time.Duration(n)*time.Second); err != nil {
		return nil, err
	}
	c1, err := readFleetCost(ctx, ws, np)
	if err != nil {
		return nil, err
	}
	p := &fleetSize{workers: len(ws), took: tr.lastTerminal().Sub(start), run: c1.minus(c0), idleFor: pick(r, 10*time.Second, 3*time.Second)}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(p.idleFor):
	}
	c2, err := readFleetCost(ctx, ws, np)
	if err != nil {
		return nil, err
	}
	p.idle = c2.minus(c1)
	p.ended, p.failed = tr.terminalCount()
	c := st.media.Counters()
	p.peak = c.PeakRunning()
	for k, v := range c.Snapshot() {
		if strings.HasPrefix(k, "submits:") && v > 1 {
			p.twice++
		}
	}
	r.logf("F1 %d workers: %d ended in %s, peak %d, %.0f board writes (%.0f conflicts)", p.workers, p.ended,
		p.took.Round(time.Second), p.peak, p.run.ops.sum("leases", "write", ""), p.run.ops.sum("leases", "write", "conflict"))
	return p, nil
}

// readFleetCost reads the workers' CPU and board operations and the NATS
// server's CPU so far.
func readFleetCost(ctx context.Context, ws []*worker, np *process) (fleetCost, error) {
	c := fleetCost{ops: boardOps{}}
	var err error
	if c.natsCPU, err = statCPU(np.pid(), false); err != nil {
		return c, err
	}
	for _, w := range ws {
		s, err := w.stats()
		if err != nil {
			return c, err
		}
		c.workerCPU += s.CPU
		if err := addMetric(ctx, "http://"+w.httpAddr+"/metrics", "sluice_quota_board_ops_total", c.ops); err != nil {
			return c, err
		}
	}
	return c, nil
}

// addMetric adds every sample of the labelled counter name on a Prometheus
// text page to into, by its label values joined with spaces.
func addMetric(ctx context.Context, url, name string, into map[string]float64) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return fmt.Errorf("%s at %s: %w", name, url, err)
		}
		var vals []string
		for l := range strings.SplitSeq(labels, ",") {
			if _, q, ok := strings.Cut(l, "="); ok {
				vals = append(vals, strings.Trim(q, `"`))
			}
		}
		into[strings.Join(vals, " ")] += v
	}
	return sc.Err()
}

func ms64(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
