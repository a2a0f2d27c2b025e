package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// c1Dir is the cluster directory of C1's jobs; its one script runs ten
// hours, so no job ends while it is measured.
const c1Dir = "/public/home/" + containerUser + "/c1"

// computeStatusRequests sums the simulator's job status requests: the
// realtime list's pages and the job details, whatever their answer.
func computeStatusRequests(sim *apisim.Compute) (list, detail int64) {
	for k, v := range sim.Counters().Snapshot() {
		switch {
		case strings.HasPrefix(k, "requests:"+apisim.EndpointComputeJobs+":"):
			list += v
		case strings.HasPrefix(k, "requests:"+apisim.EndpointComputeJob+":"):
			detail += v
		}
	}
	return list, detail
}

// computeStatus measures C1: status requests per running compute job per
// poll round with 1,000 and then 10,000 long compute jobs running on one
// worker, in this process against the compute simulator in platform mode.
// Reading each job's own detail, as sluice did before, costs 1.0.
func (r *run) computeStatus(ctx context.Context) (*Figure, error) {
	fig := &Figure{ID: "C1", Title: "compute status requests", Target: "≤ 0.1 status requests per running compute job per round (per-job detail: 1.0)"}
	counts := pick(r, []int{1000, 10000}, []int{50, 300})
	interval := pick(r, 5*time.Second, time.Second)
	rounds := pick(r, 6, 3)
	dir := filepath.Join(r.o.Dir, "c1")
	sim, stop, err := startComputeSim(ctx, dir)
	if err != nil {
		return fig, err
	}
	defer stop()
	st, err := newStack(ctx, filepath.Join(dir, "stack"), stackOptions{})
	if err != nil {
		return fig, err
	}
	defer st.close()
	last := counts[len(counts)-1]
	cfg, err := c1Config(dir, st, sim.url, last, interval)
	if err != nil {
		return fig, err
	}
	stopWorker, err := startWorker(ctx, cfg)
	if err != nil {
		return fig, err
	}
	defer stopWorker()
	fig.Settings = []string{
		fmt.Sprintf("SLUICE_MAX_INFLIGHT=%d (default 256): every job must run at once on one worker", last),
		fmt.Sprintf("SLUICE_COMPUTE_MAX_CONCURRENCY=%d (default 8; compute requests in flight, not jobs)", c1Conc),
		"SLUICE_COMPUTE_RATE_LIMIT=2000 (default 20 requests/s): only so that the submits do not take minutes; the steady polling measured stays far below either limit",
		fmt.Sprintf("SLUICE_COMPUTE_POLL_INTERVAL=%s (default 30s): more rounds in the time of the run", interval),
	}
	worst, published := 0.0, 0
	ids := jobIDs("c1", last)
	for _, n := range counts {
		ratio, err := r.c1Stage(ctx, fig, st.js, sim.Compute, ids[published:n], n, interval, rounds)
		if err != nil {
			return fig, err
		}
		published = n
		worst = max(worst, ratio)
	}
	fig.Measured = fmt.Sprintf("%.3f (worst of %d and %d jobs)", worst, counts[0], last)
	fig.Met = worst <= 0.1
	fig.Notes = append(fig.Notes, fmt.Sprintf(
		"One worker in the bench process; compute jobs whose simulated run lasts ten hours. After every job is submitted "+
			"and two poll intervals have passed, the simulator's counters of status requests (realtime list pages of 100 "+
			"jobs and job details) are read %d poll intervals apart. A round is one SLUICE_COMPUTE_POLL_INTERVAL (%s). "+
			"Reading each job's own detail, as sluice did before the list, is one detail request per job per round: 1.0 "+
			"(not run here: 10,000 details a round are the load this removes; the fallback tests show it job by job).", rounds, interval))
	return fig, nil
}

// c1Stage publishes ids, waits until n jobs are submitted and measures
// rounds poll intervals; it returns the requests per job per round.
func (r *run) c1Stage(ctx context.Context, fig *Figure, js jetstream.JetStream, sim *apisim.Compute, ids []string, n int, interval time.Duration, rounds int) (float64, error) {
	for _, id := range ids {
		if err := publishCompute(ctx, js, id); err != nil {
			return 0, err
		}
	}
	t0 := time.Now()
	for sim.Counters().Get("requests:"+apisim.EndpointComputeSubmit+":200") < int64(n) {
		// Bounded: make bench goes on to its next figure.
		if time.Since(t0) > c1SubmitWait {
			return 0, fmt.Errorf("%d of %d jobs submitted after %s", sim.Counters().Get("requests:"+apisim.EndpointComputeSubmit+":200"), n, c1SubmitWait)
		}
		if err := backoff.Sleep(ctx, 200*time.Millisecond); err != nil {
			return 0, err
		}
	}
	r.logf("C1 %d jobs submitted in %s", n, time.Since(t0).Round(time.Second))
	if err := backoff.Sleep(ctx, 2*interval); err != nil {
		return 0, err
	}
	list0, detail0 := computeStatusRequests(sim)
	start := time.Now()
	if err := backoff.Sleep(ctx, time.Duration(rounds)*interval); err != nil {
		return 0, err
	}
	list1, detail1 := computeStatusRequests(sim)
	measured := time.Since(start).Seconds() / interval.Seconds()
	if ended := sim.Counters().Get("jobs:succeeded") + sim.Counters().Get("jobs:failed"); ended > 0 {
		return 0, fmt.Errorf("%d long compute jobs ended during the measurement", ended)
	}
	total := list1 - list0 + detail1 - detail0
	ratio := float64(total) / measured / float64(n)
	fig.row(fmt.Sprintf("%d jobs: status requests per job per round", n), "**%.4f**", ratio)
	fig.row(fmt.Sprintf("%d jobs: requests in %.1f rounds", n, measured), "%d list pages, %d job details (%.1f a round)",
		list1-list0, detail1-detail0, float64(total)/measured)
	r.logf("C1 %d jobs: %.4f requests per job per round", n, ratio)
	return ratio, nil
}

// computeSim is a compute simulator served on a free port.
type computeSim struct {
	*apisim.Compute
	url string
}

// startComputeSim starts the compute simulator (platform mode) under dir
// with C1's script in place.
func startComputeSim(ctx context.Context, dir string) (*computeSim, func(), error) {
	root := filepath.Join(dir, "cluster")
	if err := os.MkdirAll(filepath.Join(root, c1Dir), 0o755); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(filepath.Join(root, c1Dir, "job.sh"), []byte("#!/bin/sh\n#SIM runfor 10h\n"), 0o644); err != nil {
		return nil, nil, err
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	url := "http://" + ln.Addr().String()
	sim := apisim.NewCompute(apisim.ComputeConfig{
		User: containerUser, Password: "unused", OrgID: "unused", AccessKey: containerAccessKey, SecretKey: containerSecretKey,
		BaseURL: url, Root: root, QueuedFor: time.Second,
	})
	srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return &computeSim{Compute: sim, url: url}, func() { stopSimulator(srv) }, nil
}

// c1SubmitWait bounds the wait for a stage's submits (10,000 take well
// under a minute on 2 busy cores).
const c1SubmitWait = 5 * time.Minute

// c1Conc is C1's SLUICE_COMPUTE_MAX_CONCURRENCY: compute requests in
// flight, not jobs. At the job count (10,000) each request in flight held
// a connection, two descriptors in this process (client and simulator),
// and the submits stalled on "too many open files".
const c1Conc = 64

// c1Config is the worker's config: compute jobs only, n of them at once.
func c1Config(dir string, st *stack, simURL string, n int, interval time.Duration) (*config.Config, error) {
	cfg, err := config.Parse()
	if err != nil {
		return nil, err
	}
	cfg.DataDir, cfg.NATSURL, cfg.Kinds, cfg.HTTPAddr, cfg.Console = filepath.Join(dir, "worker"), st.natsURL, []string{"compute"}, "127.0.0.1:0", false
	cfg.S3Endpoint, cfg.S3Bucket, cfg.S3PathStyle, cfg.S3Region = st.s3Endpoint, bucket, true, s3dev.Region
	cfg.S3AccessKeyID, cfg.S3SecretAccessKey = s3dev.AccessKeyID, s3dev.SecretAccessKey
	cfg.ComputeBaseURL, cfg.ComputeUser, cfg.ComputeAccessKey, cfg.ComputeSecretKey = simURL, containerUser, containerAccessKey, containerSecretKey
	cfg.ComputePassword, cfg.ComputeOrgID = "", ""
	cfg.ComputePoll, cfg.AllowPrivateURLs = interval, true
	cfg.MaxInflight, cfg.ComputeConc, cfg.ComputeRate = n, c1Conc, 2000
	return cfg, cfg.Validate()
}

// publishCompute publishes compute job id: C1's ten-hour script, no
// inputs, no outputs.
func publishCompute(ctx context.Context, js jetstream.JetStream, id string) error {
	spec, err := json.Marshal(map[string]any{
		"id": id, "kind": "compute",
		"compute": map[string]any{
			"template": map[string]string{"type": "BASIC", "name": "BASE"},
			"job": map[string]any{
				"name": id, "queue": "normal", "nodes": 1, "ppn": 1, "wall_time": "12:00:00",
				"work_dir": c1Dir, "script": c1Dir + "/job.sh",
			},
		},
	})
	if err != nil {
		return err
	}
	return publishSpec(ctx, js, "compute", id, spec)
}
