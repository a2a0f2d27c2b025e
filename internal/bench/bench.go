// Package bench is sluice's load harness: it measures the figures of
// BENCHMARKS.md (P1 throughput against a bare floor pipeline, P2 polling
// efficiency, P3 scale, P4 streaming against a direct transfer-manager
// upload, P5 latency, Q1 the fleet quota across worker processes, F1 its
// cost per job with 16 workers against 3, Q2 the
// fleet's back-pressure under an account's concurrency limit) on one
// machine, each as a ratio or a count taken side
// by side in one run, and reports the absolute numbers with them.
//
// NATS, the S3-compatible store and the media API simulator run inside the
// harness (the store in a process of its own for P4); the worker under test
// is the built cmd/worker binary in its own process, so its memory and CPU
// are read from /proc. The floor pipeline and the direct upload run as
// processes of the bench binary itself (RunFloor, RunDirectUpload).
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// Options configures a run.
type Options struct {
	// WorkerBin is the built cmd/worker binary. Required.
	WorkerBin string
	// Self is the bench binary, run again for the floor pipeline, the
	// store of P4 and the direct upload. Required.
	Self string
	// Dir holds every scenario's files and process logs. Required.
	Dir string
	// Quick runs the smoke variant: fewer jobs, fewer rounds, smaller
	// sizes, same code paths.
	Quick bool
	// Only limits the run to these figures ("P1".."P5", "Q1", "F1", "Q2", "T1", "U1", "W1", "W2", "C1", "B1"); empty
	// runs all but B1, which runs only when named (its million jobs take
	// about 15 minutes; its smoke variant runs with Quick).
	Only []string
	// ProfileDir, when set, runs the worker as "bench worker" with pprof
	// and saves CPU and heap profiles of P1's and P3's measured phases
	// there. Such a run is for finding hot spots, not for the figures.
	ProfileDir string
	// P4Store is P4's S3 store: "versitygw" (its posix backend, the
	// default) or "embedded" (internal/s3dev, served by "bench s3serve").
	P4Store string
	// VersityGW is the versitygw binary for P4; by default the one next to
	// Self (bin/versitygw, built by make bench).
	VersityGW string
	// WebhookOutage is how long W2's receiver is down. Defaults to 10
	// minutes (20 s with Quick).
	WebhookOutage time.Duration
	// Backlog is B1's backlog in jobs; 0 is DefaultBacklog (20,000 with
	// Quick).
	Backlog int
	// BacklogModes are B1's modes, "fifo" (no tenant settings) and "fair"
	// (fair scheduling); empty runs both, or with Quick fair alone (it
	// takes every path fifo takes, and the admission's).
	BacklogModes []string
	// Progress receives one line per step. Defaults to io.Discard.
	Progress io.Writer
}

// run is one harness run.
type run struct {
	o   Options
	log io.Writer
}

// Run measures the selected figures and returns the report. A figure that
// cannot be measured is reported with its error; Run fails only when
// nothing could be set up.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.WorkerBin == "" || o.Self == "" || o.Dir == "" {
		return nil, fmt.Errorf("bench: WorkerBin, Self and Dir are required")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	r := &run{o: o, log: o.Progress}
	rep := &Report{Machine: readMachine(), Quick: o.Quick, Started: time.Now()}
	scenarios := []struct {
		id  string
		run func(context.Context) (*Figure, error)
	}{
		{"P1", r.throughput},
		{"P2", r.polling},
		{"P3", r.scale},
		{"P4", r.streaming},
		{"P5", r.latency},
		{"H1", r.httpSubmit},
		{"Q1", r.fleet},
		{"F1", r.fleetScale},
		{"Q2", r.concurrency},
		{"T1", r.tenants},
		{"U1", r.utilization},
		{"W1", r.webhookLatency},
		{"W2", r.webhookOutage},
		{"C1", r.computeStatus},
		{"B1", r.backlog},
	}
	for _, sc := range scenarios {
		if len(o.Only) > 0 && !slices.Contains(o.Only, sc.id) || len(o.Only) == 0 && sc.id == "B1" && !o.Quick {
			continue
		}
		if o.Quick && len(o.Only) == 0 && (sc.id == "Q1" || sc.id == "T1" || sc.id == "U1" || sc.id == "W2") {
			// Over a minute even small (phases of several workers at a few requests a
			// second): not part of the smoke check unless asked for.
			continue
		}
		start := time.Now()
		r.logf("%s: start", sc.id)
		fig, err := sc.run(ctx)
		if fig == nil {
			fig = &Figure{ID: sc.id}
		}
		if err != nil {
			fig.Err = err.Error()
			r.logf("%s: %v", sc.id, err)
		}
		fig.Took = time.Since(start).Round(time.Second)
		rep.Figures = append(rep.Figures, fig)
		r.logf("%s: done in %s", sc.id, fig.Took)
		if ctx.Err() != nil {
			break
		}
	}
	rep.Took = time.Since(rep.Started).Round(time.Second)
	return rep, nil
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// pick returns quick in the smoke variant, else full.
func pick[T any](r *run, full, quick T) T {
	if r.o.Quick {
		return quick
	}
	return full
}

// scenarioDir is a fresh directory for one scenario step.
func (r *run) scenarioDir(name string) string {
	return filepath.Join(r.o.Dir, name)
}

// worker is a worker process under test.
type worker struct {
	*process
	httpAddr  string
	pprofAddr string
}

// startWorker starts the worker binary against st with the stack's
// environment plus env, and waits until it serves /readyz.
func (r *run) startWorker(ctx context.Context, st *stack, name string, env map[string]string) (*worker, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	all := st.workerEnv()
	all["SLUICE_HTTP_ADDR"] = addr
	all["SLUICE_WORKER_NAME"] = name
	for k, v := range env {
		all[k] = v
	}
	var kv []string
	for k, v := range all {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	bin, args, pprofAddr := r.o.WorkerBin, []string(nil), ""
	if r.o.ProfileDir != "" {
		if pprofAddr, err = freeAddr(); err != nil {
			return nil, err
		}
		bin, args = r.o.Self, []string{"worker", "-pprof", pprofAddr}
	}
	p, err := startProcess(name, bin, args, kv, st.dir)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, "http://"+addr+"/readyz", 30*time.Second, p.done); err != nil {
		p.stop(5 * time.Second)
		return nil, fmt.Errorf("worker %s: %w; see %s", name, err, p.log.Name())
	}
	return &worker{process: p, httpAddr: addr, pprofAddr: pprofAddr}, nil
}

// goroutines reads go_goroutines from the worker's /metrics.
func (w *worker) goroutines(ctx context.Context) (float64, error) {
	return metricValue(ctx, "http://"+w.httpAddr+"/metrics", "go_goroutines")
}

// startFloor starts the floor pipeline process against st and waits until
// it pulls.
func (r *run) startFloor(ctx context.Context, st *stack, name string, concurrency int) (*process, error) {
	args := []string{"floor",
		"-nats", st.natsURL, "-media", st.simURL, "-media-key", mediaAPIKey,
		"-s3", st.s3Endpoint, "-bucket", bucket, "-concurrency", fmt.Sprint(concurrency)}
	p, err := startProcess(name, r.o.Self, args, nil, st.dir)
	if err != nil {
		return nil, err
	}
	if _, err := p.line(ctx, "READY", 30*time.Second); err != nil {
		p.stop(5 * time.Second)
		return nil, err
	}
	return p, nil
}

// session is a scenario's stack with one worker process and a tracker of
// the scenario's jobs.
type session struct {
	st *stack
	w  *worker
	tr *tracker
}

// startSession starts a stack whose simulator returns 1 KiB results, a
// worker with env and a tracker of the jobs whose ids start with name.
func (r *run) startSession(ctx context.Context, name string, env map[string]string) (_ *session, err error) {
	s := &session{}
	defer func() {
		if err != nil {
			s.close(10 * time.Second)
		}
	}()
	if s.st, err = newStack(ctx, r.scenarioDir(name), stackOptions{Media: apisim.MediaConfig{ResultSize: 1 << 10}}); err != nil {
		return nil, err
	}
	if s.w, err = r.startWorker(ctx, s.st, name+"-worker", env); err != nil {
		return nil, err
	}
	if s.tr, err = s.st.track(name); err != nil {
		return nil, err
	}
	return s, nil
}

// close stops the worker (within grace), the tracker and the stack.
func (s *session) close(grace time.Duration) {
	if s.tr != nil {
		s.tr.close()
	}
	if s.w != nil {
		s.w.stop(grace)
	}
	if s.st != nil {
		s.st.close()
	}
}
