package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// PeerOptions configures RunPeer, the side-by-side run of sluice and its
// River + Postgres peer (bench/riverpeer).
type PeerOptions struct {
	// WorkerBin is the built cmd/worker binary. Required.
	WorkerBin string
	// Self is the bench binary ("bench natsserve" serves sluice's NATS).
	// Required.
	Self string
	// Dir holds the run's files and process logs. Required.
	Dir string
	// RiverPeer is the built bench/riverpeer binary; by default riverpeer
	// next to Self.
	RiverPeer string
	// VersityGW is the S3 store's binary; by default versitygw next to
	// Self.
	VersityGW string
	// PostgresBin is the directory of initdb and postgres, or a directory
	// holding <version>/bin; by default DefaultPostgresBin.
	PostgresBin string
	// Pairs is the number of pairs of passes (default 6); Jobs the jobs of
	// a pass's batch (default 2,000); LatencyJobs the jobs run one at a
	// time after it (default 50).
	Pairs, Jobs, LatencyJobs int
	// Label names what was measured in the report (e.g. a commit).
	Label string
	// Progress receives one line per step. Defaults to io.Discard.
	Progress io.Writer
}

// peerPass is one pass of one side: a batch of quick jobs, timed and its
// CPU read per process, then jobs one at a time for the latency.
type peerPass struct {
	who     string
	jobs    int
	elapsed time.Duration
	// CPU time over the batch: the worker process; the queue's store
	// (nats-server, or every Postgres process); the S3 store (versitygw);
	// the rest (the harness: simulator, publisher and event tracker; for
	// River also the driver process that inserts and watches the jobs).
	worker, store, s3, rest time.Duration
	// latencies are enqueue → completion, one job at a time, sorted.
	latencies []time.Duration
	// writes is SLUICE_STATE writes (sluice) or snoozes (River) per job.
	writes float64
	// others is the CPU time the rest of the machine (other tenants, other
	// programs) used during the batch: all busy time less the parts'.
	others time.Duration
}

func (p peerPass) rate() float64 { return float64(p.jobs) / p.elapsed.Seconds() }

// otherCores is how many CPUs the rest of the machine kept busy, on
// average, during the batch.
func (p peerPass) otherCores() float64 { return p.others.Seconds() / p.elapsed.Seconds() }

func (p peerPass) per(d time.Duration) time.Duration { return d / time.Duration(p.jobs) }

// headline is CPU per job of the worker and the queue's store.
func (p peerPass) headline() time.Duration { return p.per(p.worker + p.store) }

func (p peerPass) all() time.Duration { return p.per(p.worker + p.store + p.s3 + p.rest) }

// PeerReport is the outcome of RunPeer.
type PeerReport struct {
	Machine    Machine
	Label      string
	Started    time.Time
	Took       time.Duration
	LoadBefore string
	LoadAfter  string
	Postgres   string
	Jobs       int
	Latency    int
	// Pairs holds each pair's sluice and River pass, and which ran first.
	Pairs []PeerPair
}

// PeerPair is one pair of passes.
type PeerPair struct {
	Sluice, River peerPass
	RiverFirst    bool
}

// peerRun is the state of one RunPeer.
type peerRun struct {
	*run
	po         PeerOptions
	riverBin   string
	pg         *postgres
	vgw        *process
	s3Endpoint string
	s3Data     string
	simURL     string
	media      *apisim.Media
}

// RunPeer runs sluice and the River + Postgres peer in alternating passes on
// the same simulator and S3 store (versitygw): each pass runs Jobs quick
// video jobs (task time 0, one 64 KiB result) through a fresh worker and a
// fresh queue (a new NATS server process; a new Postgres database), then
// LatencyJobs one at a time.
func RunPeer(ctx context.Context, o PeerOptions) (*PeerReport, error) {
	if o.WorkerBin == "" || o.Self == "" || o.Dir == "" {
		return nil, fmt.Errorf("bench peer: WorkerBin, Self and Dir are required")
	}
	o.Pairs, o.Jobs, o.LatencyJobs = cmp.Or(o.Pairs, 6), cmp.Or(o.Jobs, 2000), cmp.Or(o.LatencyJobs, 50)
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	pgBin, err := FindPostgresBin(cmp.Or(o.PostgresBin, DefaultPostgresBin))
	if err != nil {
		return nil, err
	}
	pr := &peerRun{run: &run{o: Options{WorkerBin: o.WorkerBin, Self: o.Self, Dir: o.Dir}, log: o.Progress}, po: o}
	pr.riverBin = cmp.Or(o.RiverPeer, filepath.Join(filepath.Dir(o.Self), "riverpeer"))
	vgwBin := cmp.Or(o.VersityGW, filepath.Join(filepath.Dir(o.Self), "versitygw"))
	for _, b := range []struct{ path, how string }{{pr.riverBin, "make riverpeer"}, {vgwBin, "make versitygw"}, {o.WorkerBin, "make build"}} {
		if _, err := os.Stat(b.path); err != nil {
			return nil, fmt.Errorf("%w (%s builds it)", err, b.how)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	rep := &PeerReport{Machine: readMachine(), Label: o.Label, Started: time.Now(), LoadBefore: loadAvg(), Jobs: o.Jobs, Latency: o.LatencyJobs}
	if out, err := exec.Command(filepath.Join(pgBin, "postgres"), "--version").Output(); err == nil {
		rep.Postgres = strings.TrimSpace(string(out))
	}
	s3Dir := filepath.Join(o.Dir, "s3")
	pr.s3Data = filepath.Join(s3Dir, "data", bucket)
	if pr.vgw, pr.s3Endpoint, err = startVersityGW(ctx, vgwBin, "versitygw", s3Dir, o.Dir); err != nil {
		return nil, err
	}
	defer pr.vgw.stop(10 * time.Second)
	pr.logf("peer: starting Postgres from %s", pgBin)
	if pr.pg, err = startPostgres(ctx, pgBin, o.Dir); err != nil {
		return nil, err
	}
	defer pr.pg.stop()
	media, sim, simURL, err := startSimulator(apisim.MediaConfig{ResultSize: 64 << 10}, nil)
	if err != nil {
		return nil, err
	}
	defer stopSimulator(sim)
	pr.simURL, pr.media = simURL, media
	for i := range o.Pairs {
		pair := PeerPair{RiverFirst: i%2 == 1}
		for k := range 2 {
			river := (k == 0) == pair.RiverFirst
			var p peerPass
			if river {
				p, err = pr.riverPass(ctx, fmt.Sprintf("peer-river-%d", i))
				pair.River = p
			} else {
				p, err = pr.sluicePass(ctx, fmt.Sprintf("peer-sluice-%d", i))
				pair.Sluice = p
			}
			if err == nil {
				err = pr.paidOnce()
			}
			if err != nil {
				return nil, fmt.Errorf("pair %d, %s: %w", i+1, map[bool]string{true: "River", false: "sluice"}[river], err)
			}
			writes := ""
			if p.writes > 0 {
				writes = fmt.Sprintf("; state writes/job %.2f", p.writes)
			}
			pr.logf("peer %s pass %d: %d jobs in %s = %.0f jobs/s; CPU/job worker %s, store %s, S3 %s, rest %s; latency median %s; others' CPU %.2f cores%s",
				p.who, i, p.jobs, p.elapsed.Round(time.Millisecond), p.rate(), ms(p.per(p.worker)), ms(p.per(p.store)),
				ms(p.per(p.s3)), ms(p.per(p.rest)), ms(quantile(p.latencies, 0.5)), p.otherCores(), writes)
			pr.emptyBucket()
		}
		rep.Pairs = append(rep.Pairs, pair)
	}
	rep.LoadAfter = loadAvg()
	rep.Took = time.Since(rep.Started).Round(time.Second)
	return rep, nil
}

// paidOnce checks with the simulator that no task was submitted twice
// (every job's prompt holds its id), by either side, so far.
func (pr *peerRun) paidOnce() error {
	twice := 0
	for k, v := range pr.media.Counters().Snapshot() {
		if strings.HasPrefix(k, "submits:") && v > 1 {
			twice++
		}
	}
	if twice > 0 {
		return fmt.Errorf("%d tasks were submitted more than once", twice)
	}
	return nil
}

// cpuSnap is the CPU time so far of the parts a pass measures, and of the
// whole machine.
type cpuSnap struct{ worker, store, s3, harness, machine time.Duration }

// snap reads the worker's, the queue store's (storeCPU), versitygw's and
// this process's CPU time.
func (pr *peerRun) snap(worker *process, storeCPU func() (time.Duration, error)) (cpuSnap, error) {
	var s cpuSnap
	var err [5]error
	s.worker, err[0] = statCPU(worker.pid(), false)
	s.store, err[1] = storeCPU()
	s.s3, err[2] = statCPU(pr.vgw.pid(), false)
	s.harness, err[3] = statCPU(os.Getpid(), false)
	s.machine, err[4] = machineBusy()
	for _, e := range err {
		if e != nil {
			return s, e
		}
	}
	return s, nil
}

// fill sets p's CPU times from two snapshots; rest adds extra (a driver
// process's CPU time) to the harness's.
func (p *peerPass) fill(a, b cpuSnap, extra time.Duration) {
	p.worker, p.store, p.s3, p.rest = b.worker-a.worker, b.store-a.store, b.s3-a.s3, b.harness-a.harness+extra
	p.others = max(0, b.machine-a.machine-(p.worker+p.store+p.s3+p.rest))
}

// machineBusy is the CPU time all CPUs spent on anything but idling and
// waiting for I/O since boot (/proc/stat), steal included: time the host
// gave to other machines is time this one could not use.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var busy uint64
	for i, v := range f[1:9] { // user nice system idle iowait irq softirq steal
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat: %w", err)
		}
		if i != 3 && i != 4 {
			busy += n
		}
	}
	return time.Duration(busy) * time.Second / clockTicks, nil
}

// sluicePass runs one sluice pass: a NATS server in a process of its own
// ("bench natsserve"), the contract's streams, a worker process.
func (pr *peerRun) sluicePass(ctx context.Context, name string) (peerPass, error) {
	p := peerPass{who: "sluice", jobs: pr.po.Jobs}
	dir := pr.scenarioDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p, err
	}
	np, err := startProcess(name+"-nats", pr.o.Self, []string{"natsserve", "-dir", filepath.Join(dir, "nats")}, nil, dir)
	if err != nil {
		return p, err
	}
	defer np.stop(10 * time.Second)
	natsURL, err := np.line(ctx, "READY", 30*time.Second)
	if err != nil {
		return p, err
	}
	st, err := newStack(ctx, dir, stackOptions{NATSURL: natsURL, ExternalS3: true, SimURL: pr.simURL})
	if err != nil {
		return p, err
	}
	defer st.close()
	st.s3Endpoint = pr.s3Endpoint
	w, err := pr.startWorker(ctx, st, name, throughputEnv)
	if err != nil {
		return p, err
	}
	defer w.stop(30 * time.Second)
	tr, err := st.track(name + "-")
	if err != nil {
		return p, err
	}
	natsCPU := func() (time.Duration, error) { return statCPU(np.pid(), false) }
	c0, err := pr.snap(w.process, natsCPU)
	if err != nil {
		return p, err
	}
	start := time.Now()
	if _, err := st.publishJobs(ctx, jobIDs(name+"-", p.jobs), instant); err != nil {
		return p, err
	}
	err = tr.waitEnded(ctx, p.jobs, 5*time.Minute)
	tr.close()
	if err != nil {
		return p, fmt.Errorf("%w; see %s", err, w.log.Name())
	}
	c1, err := pr.snap(w.process, natsCPU)
	if err != nil {
		return p, err
	}
	p.elapsed = tr.lastTerminal().Sub(start)
	p.fill(c0, c1, 0)
	if _, failed := tr.terminalCount(); failed > 0 {
		return p, fmt.Errorf("%d jobs did not succeed; see %s", failed, w.log.Name())
	}
	writes, err := st.stateWrites(ctx)
	if err != nil {
		return p, err
	}
	p.writes = float64(writes) / float64(p.jobs)
	p.latencies, err = st.oneByOne(ctx, name+"-lat", pr.po.LatencyJobs, 5)
	return p, err
}

// riverPass runs one River pass: a new database with River's migrations,
// a riverpeer worker process, and riverpeer's driver inserting the jobs
// and waiting for them.
func (pr *peerRun) riverPass(ctx context.Context, name string) (peerPass, error) {
	p := peerPass{who: "River", jobs: pr.po.Jobs}
	dir := pr.scenarioDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p, err
	}
	db := strings.ReplaceAll(name, "-", "_")
	if _, _, err := pr.riverpeer(ctx, dir, name+"-db", "", "db", "-url", pr.pg.url, "-create", db); err != nil {
		return p, err
	}
	defer func() {
		_, _, _ = pr.riverpeer(context.WithoutCancel(ctx), dir, name+"-dropdb", "", "db", "-url", pr.pg.url, "-drop", db)
	}()
	w, err := pr.startRiverWorker(ctx, dir, name, db)
	if err != nil {
		return p, err
	}
	defer w.stop(30 * time.Second)
	c0, err := pr.snap(w, pr.pg.cpu)
	if err != nil {
		return p, err
	}
	res, driverCPU, err := pr.riverpeer(ctx, dir, name+"-drive", "RESULT", "drive", "-db", pr.pg.dbURL(db),
		"-n", strconv.Itoa(p.jobs), "-prefix", name)
	if err != nil {
		return p, fmt.Errorf("%w; see %s", err, w.log.Name())
	}
	c1, err := pr.snap(w, pr.pg.cpu)
	if err != nil {
		return p, err
	}
	p.fill(c0, c1, driverCPU)
	if res.Completed != p.jobs {
		return p, fmt.Errorf("%d of %d jobs completed, %d discarded or cancelled; see %s", res.Completed, p.jobs, res.Unsuccessful, w.log.Name())
	}
	p.elapsed, p.writes = time.Duration(res.ElapsedNS), res.Snoozes
	lat, _, err := pr.riverpeer(ctx, dir, name+"-latency", "RESULT", "drive", "-db", pr.pg.dbURL(db),
		"-n", strconv.Itoa(pr.po.LatencyJobs), "-prefix", name+"-lat", "-one-by-one")
	if err != nil {
		return p, err
	}
	for _, ns := range lat.LatenciesNS {
		p.latencies = append(p.latencies, time.Duration(ns))
	}
	slices.Sort(p.latencies)
	return p, nil
}

// startRiverWorker starts "riverpeer work" on database db with the
// run's simulator and S3 store, plus extra flags, and waits until it
// works.
func (pr *peerRun) startRiverWorker(ctx context.Context, dir, name, db string, extra ...string) (*process, error) {
	env := []string{"MEDIA_API_KEY=" + mediaAPIKey, "AWS_ACCESS_KEY_ID=" + s3dev.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + s3dev.SecretAccessKey, "AWS_REGION=" + s3dev.Region}
	args := append([]string{"work", "-db", pr.pg.dbURL(db), "-media", pr.simURL, "-s3", pr.s3Endpoint, "-bucket", bucket}, extra...)
	w, err := startProcess(name, pr.riverBin, args, env, dir)
	if err != nil {
		return nil, err
	}
	if _, err := w.line(ctx, "READY", 30*time.Second); err != nil {
		w.stop(5 * time.Second)
		return nil, err
	}
	return w, nil
}

// riverResult is riverpeer drive's RESULT line.
type riverResult struct {
	Completed    int     `json:"completed"`
	Unsuccessful int     `json:"unsuccessful"`
	ElapsedNS    int64   `json:"elapsed_ns"`
	LatenciesNS  []int64 `json:"latencies_ns"`
	Snoozes      float64 `json:"snoozes"`
}

// riverpeer runs the riverpeer binary to its end; with result set, it
// decodes the line it prints after that prefix. It returns the process's
// CPU time.
func (pr *peerRun) riverpeer(ctx context.Context, dir, name, result string, args ...string) (riverResult, time.Duration, error) {
	var res riverResult
	p, err := startProcess(name, pr.riverBin, args, nil, dir)
	if err != nil {
		return res, 0, err
	}
	if result != "" {
		line, err := p.line(ctx, result, 10*time.Minute)
		if err != nil {
			p.stop(5 * time.Second)
			return res, 0, err
		}
		if err := json.Unmarshal([]byte(line), &res); err != nil {
			return res, 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
	}
	if err := p.wait(ctx); err != nil {
		return res, 0, fmt.Errorf("riverpeer %s: %w; see %s", args[0], err, p.log.Name())
	}
	st := p.cmd.ProcessState
	return res, st.UserTime() + st.SystemTime(), nil
}

// emptyBucket deletes the objects of the last pass from versitygw's data
// directory (between passes, when nothing writes), so that the store's
// directory stays small.
// sluice's keys start with its default SLUICE_S3_PREFIX, the peer's with
// "river/".
func (pr *peerRun) emptyBucket() {
	for _, prefix := range []string{"sluice", "river"} {
		_ = os.RemoveAll(filepath.Join(pr.s3Data, prefix))
	}
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
