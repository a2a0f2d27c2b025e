// Package chaos is sluice's reliability harness: it runs a fleet of worker
// processes against a real NATS server, a real S3-compatible store and the
// upstream simulators, breaks all of them on a schedule, and then checks
// what the product promises.
//
// A run publishes Jobs jobs of mixed kinds (text- and image-to-video,
// speech async / sync / stream, compute jobs with inputs and outputs,
// container jobs with inputs and outputs, and a few invalid specs) at
// PublishRate while
//
//   - Workers worker processes serve them, one of them killed with SIGKILL
//     every KillEvery and started again at once;
//   - both simulators answer Error5xxRate of all requests with 500 or 503
//     and Error429Rate with 429 and Retry-After, and every task or job
//     takes a random time; container creates also lose 5% of their answers
//     after the instance exists, and the first five deletes are refused;
//   - the NATS server is stopped and started again once (same port, same
//     store directory), at NATSRestartAt;
//   - the S3 store is unavailable for S3OutageFor from S3OutageAt.
//
// With Containers set, the run is on containers instead (see Containers):
// a secured three-node NATS cluster, the S3 gateway and the workers each in
// a container of their own, and the faults are a node killed, paused,
// restarted and partitioned away with a worker, besides the worker kills.
// After each fault the harness measures the time to recover: until every
// replica of the jobs stream, the events stream and the state bucket is
// current again and another job has ended.
//
// With SampleEvery set (a soak: cmd/chaos -soak, make soak), every worker
// process's memory, goroutines, open files and NATS subscriptions are
// sampled through the run, and each process lifetime must stay within a
// bound its own first minutes set (JudgeGrowth).
//
// When every job has ended (or Deadline passes) the workers are stopped and
// the run is checked: every job has exactly one terminal event, none is
// lost (no terminal event, no state record) or stuck (no terminal event);
// every artifact of a succeeded job is in the store with the size and
// sha256 its event names, and with the bytes the simulator generated; a
// job failed only for a reason sluice documents as a failure under these
// faults; upstream saw no second submission of a job except where a kill
// landed between the "submitting" checkpoint and the record of the task
// id (the record's submits counter says so: those are counted as
// Duplicates, any other as a problem); no container instance is left
// alive and no job ever had two alive at once (the simulator's counters);
// and no secret appears in a worker log, an event, a dead letter or a
// state record.
package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/mediasample"
)

// Config configures a run. Fields are in a stable order; the zero value of
// each takes its default.
type Config struct {
	// Dir holds everything of the run: the NATS store, the S3 objects, the
	// compute simulator's files and the worker logs (logs/worker-<n>.log).
	// Required.
	Dir string
	// WorkerBin is the worker binary to run (see BuildWorker). Required.
	WorkerBin string
	// Jobs is how many jobs are published. Defaults to 200.
	Jobs int
	// PublishRate is how many jobs are published per second. Defaults to 8.
	PublishRate float64
	// Workers is how many worker processes run at once. Defaults to 3.
	Workers int
	// KillEvery is the time between two SIGKILLs. Defaults to 2s.
	KillEvery time.Duration
	// AckWait is the workers' SLUICE_ACK_WAIT: a killed worker's jobs come
	// back after it. Defaults to 2s.
	AckWait time.Duration
	// MaxDeliver is the workers' SLUICE_MAX_DELIVER. Every kill redelivers
	// the jobs its worker held, so a job sees many more deliveries than in
	// production; the limit must stay out of reach. Defaults to 1000.
	MaxDeliver int
	// Error5xxRate and Error429Rate are the simulators' fault rates on
	// every endpoint. Default to 0.03 and 0.02.
	Error5xxRate, Error429Rate float64
	// NATSRestartAt is when, after the start, the NATS server is stopped
	// and started again; NATSDownFor is how long it stays down. Default to
	// a third of the publishing time and 1s.
	NATSRestartAt, NATSDownFor time.Duration
	// S3OutageAt is when, after the start, the S3 store goes away for
	// S3OutageFor. Default to two thirds of the publishing time and 10s.
	S3OutageAt, S3OutageFor time.Duration
	// Deadline bounds the run: a job without a terminal event by then is
	// stuck. Defaults to the publishing time plus 3 minutes.
	Deadline time.Duration
	// Seed drives the job mix and the choice of the worker to kill.
	// Defaults to the current time.
	Seed uint64
	// Progress receives a progress line every few seconds. Defaults to
	// io.Discard.
	Progress io.Writer
	// Containers, when set, runs the scenario on containers (WorkerBin
	// is then not used).
	Containers *Containers
	// NATSURL, when set, is the NATS the run uses (comma-separated URLs of
	// a cluster's nodes, say) instead of a server of its own; the caller
	// runs it and breaks it with Faults. The S3 store is still the run's.
	NATSURL string
	// Replicas is the replica count of the streams and buckets on the
	// caller's NATS (the workers' SLUICE_NATS_REPLICAS). Defaults to 1.
	Replicas int
	// FleetMediaTasks, when set, is the workers' SLUICE_FLEET_MEDIA_TASKS:
	// the report then holds the simulator's highest count of media tasks
	// upstream at once against it.
	FleetMediaTasks int
	// ClockOffsets, when set, are the workers' SLUICE_FAULT_CLOCK_OFFSET,
	// worker slot i running ClockOffsets[i mod len]: a fleet whose clocks
	// disagree. The worker binary must be built with the faults tag
	// (BuildWorker's tags), which a release build does not read.
	ClockOffsets []time.Duration
	// Faults are the caller's own faults, injected with NATSURL instead of
	// the NATS restart, in order of At, each with its recovery measured.
	// Names must differ.
	Faults []Fault
	// FaultEvery, when set, repeats the NATS restart and the S3 outage
	// through the publishing time: a restart at a third and an outage at
	// two thirds of every FaultEvery (NATSRestartAt and S3OutageAt are
	// then not used). Defaults to 0: each once.
	FaultEvery time.Duration
	// Spared is how many worker slots, the first ones, are never killed:
	// their processes live through the whole run (a soak watches them
	// grow). Defaults to 0; must be below Workers while KillEvery >= 0.
	Spared int
	// SampleEvery, when set, samples every worker process's resident
	// memory, goroutines, open files and NATS subscriptions this often,
	// and the report judges their growth by Growth (a soak). Processes
	// only, on the run's own NATS server. Defaults to 0: no samples.
	SampleEvery time.Duration
	// Growth bounds the sampled series (see GrowthBound's defaults).
	Growth GrowthBound
}

// Fault is a fault the caller injects during a run.
type Fault struct {
	// Name names the fault in the report (e.g. "kill KV leader").
	Name string
	// At is when, after the start, the fault begins.
	At time.Duration
	// Run injects the fault and returns once the system is whole again (a
	// killed node restarted, say).
	Run func(ctx context.Context) error
}

func (c Config) withDefaults() Config {
	c.Jobs = cmp.Or(c.Jobs, 200)
	c.PublishRate = cmp.Or(c.PublishRate, 8)
	c.Workers = cmp.Or(c.Workers, 3)
	if c.Containers != nil {
		// A container takes a second or two to start: kill less often.
		c.KillEvery = cmp.Or(c.KillEvery, 15*time.Second)
		c.Containers.withDefaults()
	}
	c.KillEvery = cmp.Or(c.KillEvery, 2*time.Second)
	c.AckWait = cmp.Or(c.AckWait, 2*time.Second)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, 1000)
	c.Error5xxRate = cmp.Or(c.Error5xxRate, 0.03)
	c.Error429Rate = cmp.Or(c.Error429Rate, 0.02)
	publishing := c.publishTime()
	c.NATSRestartAt = cmp.Or(c.NATSRestartAt, publishing/3)
	c.NATSDownFor = cmp.Or(c.NATSDownFor, time.Second)
	c.S3OutageAt = cmp.Or(c.S3OutageAt, publishing*2/3)
	c.S3OutageFor = cmp.Or(c.S3OutageFor, 10*time.Second)
	c.Deadline = cmp.Or(c.Deadline, publishing+3*time.Minute)
	c.Seed = cmp.Or(c.Seed, uint64(time.Now().UnixNano()))
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

func (c Config) publishTime() time.Duration {
	return time.Duration(float64(c.Jobs) / c.PublishRate * float64(time.Second))
}

func (c Config) validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("chaos: Dir is required"))
	}
	if c.WorkerBin == "" && c.Containers == nil {
		errs = append(errs, errors.New("chaos: WorkerBin is required"))
	}
	if c.Jobs < 0 || c.Workers < 1 || c.PublishRate <= 0 {
		errs = append(errs, errors.New("chaos: Jobs, Workers and PublishRate must be positive"))
	}
	if c.SampleEvery > 0 && (c.Containers != nil || c.NATSURL != "") {
		errs = append(errs, errors.New("chaos: SampleEvery needs worker processes and the run's own NATS server (no Containers, no NATSURL)"))
	}
	if c.Spared < 0 || (c.Spared >= c.Workers && c.KillEvery >= 0) {
		errs = append(errs, errors.New("chaos: Spared must be at least 0 and below Workers"))
	}
	if c.AckWait < time.Second {
		errs = append(errs, errors.New("chaos: AckWait must be at least 1s (the worker's minimum)"))
	}
	return errors.Join(errs...)
}

// Run runs the scenario of cfg and returns its report. The error is for a
// harness that could not run (a port, a directory, the worker binary); a
// run that ran but broke a promise returns a report with Problems.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	logDir := filepath.Join(cfg.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	in, err := startInfra(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer in.close()

	// Frequent pings: a connection to a paused node is given up within
	// seconds, so that jobs keep being published through the fault.
	opts := append(in.natsOptions(), nats.Name("sluice-chaos"), nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond),
		nats.PingInterval(2*time.Second), nats.MaxPingsOutstanding(2))
	nc, err := nats.Connect(in.natsURL(), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	// A cluster just started may still be electing its leaders.
	ensure := func() error {
		ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return contract.Ensure(ectx, js, contract.Options{AckWait: cfg.AckWait, Replicas: in.replicas()})
	}
	if err := retryStart(ctx, ensure); err != nil {
		return nil, err
	}
	jobs := plan(cfg.Jobs, cfg.Seed, bucket)
	if err := uploadInputs(ctx, in.s3c); err != nil {
		return nil, err
	}

	r := &run{cfg: cfg, in: in, js: js, jobs: jobs, events: newEventLog(), start: time.Now(), faults: map[string]int{},
		sampling: newSampler()}
	if in.cl != nil {
		cf, err := newContainerFleet(in.cl, runEnv(in, cfg), logDir, cfg.Workers)
		if err != nil {
			return nil, err
		}
		r.fleet = cf
	} else {
		r.fleet = newFleet(cfg.WorkerBin, workerEnv(in, cfg), logDir, cfg.Workers, cfg.ClockOffsets)
	}
	for i := range cfg.Workers {
		if err := r.fleet.start(i); err != nil {
			r.fleet.stop(0)
			return nil, err
		}
	}
	r.drive(ctx)
	r.fleet.stop(15 * time.Second)
	r.settleEvents(ctx)
	return r.verify(ctx, logDir)
}

// uploadInputs puts the run's input objects: the first frame of the
// image-to-video jobs and the compute scripts.
func uploadInputs(ctx context.Context, c *s3.Client) error {
	put := func(key, body string) error {
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)})
		if err != nil {
			return fmt.Errorf("upload %s: %w", key, err)
		}
		return nil
	}
	// A real picture: the worker probes media inputs before submitting.
	if err := put(frameKey, string(mediasample.PNG(384, 256))); err != nil {
		return err
	}
	for i := range computeVariants {
		if err := put(computeScriptKey(i), computeScript(i)); err != nil {
			return err
		}
	}
	return nil
}

// run is one run in progress.
type run struct {
	cfg    Config
	in     *infra
	js     jetstream.JetStream
	jobs   []plannedJob
	fleet  workerFleet
	events *eventLog
	start  time.Time
	// sampling holds the resource series of a soak (Config.SampleEvery).
	sampling *sampler

	resubmits map[string]int // job id -> submit-window resubmissions logged
	published atomic.Int64

	mu         sync.Mutex // guards the fields below
	faultErrs  []error
	faults     map[string]int // fault type -> times injected
	recoveries []Recovery
	elapsed    time.Duration
}

// drive publishes, kills, injects the NATS restart and the S3 outage, and
// returns once every job has its terminal event and SLUICE_JOBS is empty,
// or at the deadline.
func (r *run) drive(ctx context.Context) {
	ctx, cancel := context.WithDeadline(ctx, r.start.Add(r.cfg.Deadline))
	defer cancel()
	var bg sync.WaitGroup
	bgCtx, stopBG := context.WithCancel(ctx)
	defer func() { stopBG(); bg.Wait() }()

	bg.Go(func() { r.publish(bgCtx) })
	bg.Go(func() { r.kill(bgCtx) })
	if r.cfg.SampleEvery > 0 {
		bg.Go(func() { r.sample(bgCtx) })
	}
	faultsDone := make(chan struct{})
	bg.Go(func() { defer close(faultsDone); r.injectFaults(bgCtx) })

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastProgress := time.Now()
	for {
		select {
		case <-ctx.Done():
			r.finish()
			return
		case <-tick.C:
		}
		// Bounded: a request that went to a server just killed is never
		// answered.
		pctx, cancelPoll := context.WithTimeout(ctx, 5*time.Second)
		_ = r.events.poll(pctx, r.js)
		cancelPoll()
		done := r.published.Load() == int64(len(r.jobs)) && r.events.terminalJobs() >= len(r.jobs)
		select {
		case <-faultsDone:
		default:
			done = false
		}
		if done && r.jobsSettled(ctx) {
			r.finish()
			return
		}
		if time.Since(lastProgress) >= 5*time.Second {
			lastProgress = time.Now()
			kills, _ := r.fleet.counts()
			r.mu.Lock()
			faults := formatCounts(r.faults)
			r.mu.Unlock()
			fmt.Fprintf(r.cfg.Progress, "chaos: t=%s published=%d/%d terminal=%d kills=%d faults=%s\n",
				time.Since(r.start).Round(time.Second), r.published.Load(), len(r.jobs), r.events.terminalJobs(),
				kills, faults)
		}
	}
}

func (r *run) finish() {
	r.mu.Lock()
	r.elapsed = time.Since(r.start)
	r.mu.Unlock()
}

// jobsSettled reports whether SLUICE_JOBS holds no message any more: every
// job message was acked or terminated.
func (r *run) jobsSettled(ctx context.Context) bool {
	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := r.js.Stream(ictx, contract.JobsStream)
	if err != nil {
		return false
	}
	info, err := s.Info(ictx)
	return err == nil && info.State.Msgs == 0
}

// publish sends every job at PublishRate, each until the stream
// acknowledges it (Nats-Msg-Id makes a repeated publish harmless).
func (r *run) publish(ctx context.Context) {
	interval := time.Duration(float64(time.Second) / r.cfg.PublishRate)
	next := time.Now()
	for _, j := range r.jobs {
		if err := backoff.Sleep(ctx, time.Until(next)); err != nil {
			return
		}
		next = next.Add(interval)
		m := nats.NewMsg(contract.JobSubject(j.Kind))
		m.Data = j.Spec
		m.Header.Set(contract.HeaderMsgID, j.ID)
		for {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := r.js.PublishMsg(pctx, m)
			cancel()
			if err == nil {
				break
			}
			if backoff.Sleep(ctx, 250*time.Millisecond) != nil {
				return
			}
		}
		r.published.Add(1)
	}
}

// kill restarts a worker chosen at random every KillEvery, never one of
// the Spared slots.
func (r *run) kill(ctx context.Context) {
	if r.cfg.KillEvery < 0 {
		return
	}
	rng := rand.New(rand.NewPCG(r.cfg.Seed, r.cfg.Seed^0xdead))
	t := time.NewTicker(r.cfg.KillEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.fleet.restart(r.cfg.Spared + rng.IntN(r.cfg.Workers-r.cfg.Spared)); err != nil {
			r.faultError(err)
		}
	}
}

// fault is one fault of the plan: run injects it and returns once the
// system is whole again (a node back, a store back, a network joined).
type fault struct {
	kind string
	at   time.Duration
	run  func(ctx context.Context) error
}

// plan returns the run's faults in the order they are injected.
func (r *run) plan() []fault {
	if r.in.cl == nil {
		var faults []fault
		restartAt, outageAt := []time.Duration{r.cfg.NATSRestartAt}, []time.Duration{r.cfg.S3OutageAt}
		if every := r.cfg.FaultEvery; every > 0 {
			restartAt, outageAt = nil, nil
			for base := time.Duration(0); base < r.cfg.publishTime(); base += every {
				restartAt = append(restartAt, base+every/3)
				outageAt = append(outageAt, base+every*2/3)
			}
		}
		for _, at := range restartAt {
			if r.in.externalNATS == "" {
				faults = append(faults, fault{FaultNATSRestart, at, func(ctx context.Context) error { return r.in.restartNATS(ctx, r.cfg.NATSDownFor) }})
			}
		}
		for _, at := range outageAt {
			if at >= 0 {
				faults = append(faults, fault{FaultS3Outage, at, func(ctx context.Context) error { return r.in.outageS3(ctx, r.cfg.S3OutageFor) }})
			}
		}
		for _, f := range r.cfg.Faults {
			faults = append(faults, fault{f.Name, f.At, f.Run})
		}
		slices.SortStableFunc(faults, func(a, b fault) int { return cmp.Compare(a.at, b.at) })
		return faults
	}
	// Each on the leader of what it hurts most, spread over the publishing
	// time so that jobs keep arriving through all of them.
	cl, p := r.in.cl, r.cfg.publishTime()
	onLeader := func(stream string, do func(context.Context, string) error) func(context.Context) error {
		return func(ctx context.Context) error {
			node, err := leader(ctx, r.js, stream)
			if err != nil {
				return err
			}
			fmt.Fprintf(r.cfg.Progress, "chaos: t=%s %s leads %s\n", time.Since(r.start).Round(time.Second), node, stream)
			return do(ctx, node)
		}
	}
	partitioned := r.fleet.(*containerFleet).partitioned()
	return []fault{
		{FaultNodeKill, p / 6, onLeader(contract.JobsStream, cl.killNode)},
		{FaultNodePause, 2 * p / 6, onLeader("KV_"+contract.StateBucket, cl.pauseNode)},
		{FaultNodeRestart, 3 * p / 6, onLeader(contract.EventsStream, cl.restartNode)},
		{FaultPartition, 4 * p / 6, func(ctx context.Context) error { return cl.partition(ctx, partitioned) }},
	}
}

// injectFaults injects the plan's faults one after the other, each at its
// time or once the one before has recovered, whichever is later, and
// measures the time each takes to recover.
func (r *run) injectFaults(ctx context.Context) {
	for _, f := range r.plan() {
		if err := backoff.Sleep(ctx, time.Until(r.start.Add(f.at))); err != nil {
			return
		}
		began := time.Since(r.start)
		fmt.Fprintf(r.cfg.Progress, "chaos: t=%s fault %s\n", began.Round(time.Second), f.kind)
		if err := f.run(ctx); err != nil {
			r.faultError(fmt.Errorf("%s: %w", f.kind, err))
			continue
		}
		r.mu.Lock()
		r.faults[f.kind]++
		r.mu.Unlock()
		ended := time.Now()
		took, ok := r.awaitRecovery(ctx, 3*time.Minute)
		rec := Recovery{Fault: f.kind, At: began, Lasted: ended.Sub(r.start) - began, Took: took, Recovered: ok}
		fmt.Fprintf(r.cfg.Progress, "chaos: t=%s %s\n", time.Since(r.start).Round(time.Second), rec)
		r.mu.Lock()
		r.recoveries = append(r.recoveries, rec)
		r.mu.Unlock()
	}
}

// awaitRecovery waits until the jobs stream, the events stream and the
// state bucket each have a leader and every replica current, and one more
// job has ended since the call (or every job has); it returns how long
// that took, and false when it did not happen within limit.
func (r *run) awaitRecovery(ctx context.Context, limit time.Duration) (time.Duration, bool) {
	start, said := time.Now(), time.Now()
	base := r.events.terminalJobs()
	for {
		progressed := r.events.terminalJobs() > base || r.events.terminalJobs() >= len(r.jobs)
		why := r.streamsUnhealthy(ctx)
		if progressed && why == "" {
			return time.Since(start), true
		}
		if time.Since(said) >= 5*time.Second {
			said = time.Now()
			fmt.Fprintf(r.cfg.Progress, "chaos: t=%s not recovered yet: progressed=%t %s\n",
				time.Since(r.start).Round(time.Second), progressed, why)
		}
		if time.Since(start) > limit || backoff.Sleep(ctx, 250*time.Millisecond) != nil {
			return time.Since(start), false
		}
	}
}

// streamsUnhealthy says what keeps the jobs and events streams and the
// state bucket from being whole: one does not answer, or on a cluster has
// no leader or a replica that is not current. Empty when they are whole.
func (r *run) streamsUnhealthy(ctx context.Context) string {
	for _, name := range []string{contract.JobsStream, contract.EventsStream, "KV_" + contract.StateBucket} {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := r.js.Stream(ictx, name)
		cancel()
		if err != nil {
			return fmt.Sprintf("%s: %v", name, err)
		}
		c := s.CachedInfo().Cluster
		if r.in.replicas() == 1 {
			continue
		}
		if c == nil || c.Leader == "" || len(c.Replicas) != r.in.replicas()-1 {
			return fmt.Sprintf("%s: no leader or a replica missing: %+v", name, c)
		}
		for _, p := range c.Replicas {
			if !p.Current || p.Offline {
				return fmt.Sprintf("%s: replica %s current=%t offline=%t lag=%d active %s ago", name, p.Name, p.Current, p.Offline, p.Lag, p.Active.Round(time.Millisecond))
			}
		}
	}
	return ""
}

func (r *run) faultError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faultErrs = append(r.faultErrs, err)
}

// settleEvents reads the events published up to now, retrying while NATS
// is busy.
func (r *run) settleEvents(ctx context.Context) {
	for range 10 {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := r.events.poll(pctx, r.js)
		cancel()
		if err == nil {
			return
		}
		_ = backoff.Sleep(ctx, 500*time.Millisecond)
	}
}
