package explore

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/devstack"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/worker"
)

// Settings of every schedule. A short AckWait makes a crashed worker's
// jobs come back within seconds; short tasks keep a schedule short while
// a cancel still meets a running task.
const (
	ackWait    = 2 * time.Second
	taskTime   = 300 * time.Millisecond
	fleetTasks = 2
	// videoJobs video jobs, then computeJobs compute jobs sharing one
	// compute job name.
	videoJobs   = 3
	computeJobs = 2
	// containerJobs container jobs follow (instances named after them).
	containerJobs = 1
	// The pipeline job comes last: two video steps, the second needing
	// the first.
	pipelineJob = videoJobs + computeJobs + containerJobs + 1
	// A schedule waits for every job's terminal event while anything
	// moves: a job without one when no upstream call and no state or spec
	// write happened for quietBound (far past AckWait, a delay past it and
	// the spaced retries a schedule allows, a dead worker's quota leases
	// lapsing, a pipeline's 5 s re-read) is held or lost. A slow machine
	// only makes the wait longer; settleBound ends the wait of a schedule
	// that moves for ever without ending. 60 s, not 20: on a machine
	// loaded by the whole suite one schedule sat 20 s without a decision
	// point, its workers' NATS requests timing out, where its replay
	// ends every job.
	quietBound  = 60 * time.Second
	settleBound = 5 * time.Minute
)

// job is one sluice job of a schedule. family is the job it retries (its
// own id for a first attempt): upstream objects belong to a family.
type job struct {
	id, family string
	// step: a pipeline's step, which runs only when its pipeline
	// publishes it; its pipeline's terminal event says whether it did
	// (checkPipelines).
	step bool
}

// run is one schedule's world: its own NATS server and simulators, the
// shared S3 store under its own prefix, and the workers it started.
type run struct {
	seed    uint64
	sched   *schedule
	ackWait time.Duration
	done    chan struct{} // closed when the schedule's checks begin
	nats    *testenv.NATS
	media   *apisim.Media
	compute *apisim.Compute
	cfg     config.Config
	t       testing.TB
	s3      *testenv.S3Env
	// scriptURL is the compute jobs' script (putScript).
	scriptURL string
	logs      *testenv.SyncBuffer

	mu      sync.Mutex
	jobs    []job
	workers []*workerRun
}

// workerRun is one in-process worker and its gate.
type workerRun struct {
	name   string
	dead   atomic.Bool
	cancel context.CancelFunc
	exited chan struct{}
	drop   *testenv.ReplyDropper
}

func (w *workerRun) isDead() bool { return w.dead.Load() }

// newRun starts a schedule's world.
func newRun(t testing.TB, seed uint64, s3 *testenv.S3Env) *run {
	r := &run{seed: seed, sched: newSchedule(seed), ackWait: ackWait, done: make(chan struct{}), logs: &testenv.SyncBuffer{}, t: t, s3: s3}
	r.nats = testenv.StartNATS(t)
	r.media = apisim.NewMedia(apisim.MediaConfig{APIKey: "sk-explore", TaskDuration: taskTime, PendingFor: taskTime / 3, ResultSize: 1 << 10})
	// AK/SK login: the container service needs it (compute jobs take it
	// too).
	r.compute = apisim.NewCompute(apisim.ComputeConfig{User: "alice", Password: "pw-explore", OrgID: "org-1", Root: t.TempDir(),
		AccessKey: "ak-explore", SecretKey: "sk-explore", QueuedFor: taskTime / 3, RunFor: taskTime})
	t.Cleanup(func() { _ = r.compute.Close() })
	r.cfg = config.Config{
		DataDir: t.TempDir(), Kinds: []string{"video", "compute", "container", "pipeline"},
		S3Endpoint: s3.Endpoint, S3Region: "us-east-1", S3Bucket: s3.Bucket, S3Prefix: fmt.Sprintf("explore/%d", seed), S3PathStyle: true,
		S3AccessKeyID: "sluice", S3SecretAccessKey: "s3-explore",
		MediaAPIKey: "sk-explore", ComputeUser: "alice", ComputeAccessKey: "ak-explore", ComputeSecretKey: "sk-explore",
		MaxInflight: 16, PollInterval: 100 * time.Millisecond, PollFirst: 50 * time.Millisecond,
		ComputePoll: 100 * time.Millisecond, AllowPrivateURLs: true, MaxArtifactBytes: 1 << 20,
		HTTPAddr: "127.0.0.1:0", LogLevel: "debug", LogFormat: "json", ShutdownTimeout: 5 * time.Second,
		AckWait: ackWait, MaxDeliver: 10, TaskTimeout: time.Minute,
		ComputeTimeout: time.Minute, MediaConcurrency: 8, MediaRate: 500, ComputeConc: 8, ComputeRate: 500,
		CopyConcurrency: 2, PartSize: 5 << 20, NATSReplicas: 1, EventsMaxAge: time.Hour, StateTTL: time.Hour,
		PresignTTL: time.Hour, S3CreateBucket: true, DevSimTaskTime: time.Second, DevSimComputeTime: time.Second,
		NATSMoveAfter: 10 * time.Second, SweepInterval: 200 * time.Millisecond,
		FleetMediaTasks: fleetTasks,
	}
	return r
}

// startWorker starts a fresh worker behind a gate of its own.
func (r *run) startWorker() {
	t := r.t
	r.mu.Lock()
	w := &workerRun{name: fmt.Sprintf("explore-w%d", len(r.workers)), exited: make(chan struct{})}
	r.workers = append(r.workers, w)
	r.mu.Unlock()
	g := &gate{run: r, w: w, sim: devstack.Handler(r.media, r.compute)}
	g.drop = testenv.StartReplyDropper(t, strings.TrimPrefix(r.nats.URL, "nats://"))
	w.drop = g.drop
	g.drop.SetDecide(g.decideWrite)
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	cfg := r.cfg
	cfg.WorkerName, cfg.NATSURL, cfg.MediaBaseURL, cfg.ComputeBaseURL = w.name, g.drop.URL(), srv.URL, srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	log := logging.New(r.logs, "json", "debug").With().Str("w", w.name).Logger()
	go func() {
		defer close(w.exited)
		_ = worker.Run(ctx, cfg, log, nil)
	}()
}

// crash stops w dead (its NATS connections cut, its calls unanswered)
// and starts a fresh worker in its place.
func (r *run) crash(w *workerRun) {
	if w.dead.CompareAndSwap(false, true) {
		r.cutAndReplace(w, true)
	}
}

// crashing is crash for a write that is forwarded first: the gate's
// dropper cuts itself once the write is out.
func (r *run) crashing(w *workerRun) {
	if w.dead.CompareAndSwap(false, true) {
		r.cutAndReplace(w, false)
	}
}

// cutAndReplace cuts w's NATS (now, or once the write in flight is out)
// and starts its successor, unless the schedule's checks have begun.
func (r *run) cutAndReplace(w *workerRun, now bool) {
	if now {
		w.drop.Cut()
	}
	select {
	case <-r.done:
	default:
		r.startWorker()
	}
}
