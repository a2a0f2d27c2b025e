// Command chaos runs sluice's reliability scenario (package chaos): a fleet
// of worker processes, one killed every few seconds, the NATS server
// restarted, the S3 store taken away, the upstream simulators failing and
// rate limiting; then it checks every job and prints the run's figures as
// its last line. It exits 1 when a promise was broken.
//
// With -containers (make chaos-cluster) the run is on Docker instead: a
// secured three-node NATS cluster, the S3 gateway and the workers each in
// a container (images from make images, or SLUICE_NATS_IMAGE,
// SLUICE_S3_IMAGE and SLUICE_WORKER_IMAGE), and NATS nodes killed, paused,
// restarted and partitioned away with a worker; it prints the time each
// fault took to recover from before the figures.
//
// With -skew the workers' clocks run at -skew, 0 and +skew (a worker built
// with -tags faults, SLUICE_FAULT_CLOCK_OFFSET): make chaos CHAOS_SKEW=90s.
//
// With -soak the run lasts that long at a low rate of jobs and faults (make
// soak): a worker killed every minute (the others live through the run),
// the NATS restart and the S3 outage every 10 minutes, 1% 5xx and 1% 429;
// every worker process's memory, goroutines, open files and NATS
// subscriptions are sampled every -sample, and the run fails when a
// process grows past its first -baseline's highest values times 1.5 plus
// a small slack. It prints the series before the figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/chaos"
)

func main() {
	var cfg chaos.Config
	flag.IntVar(&cfg.Jobs, "jobs", 2000, "jobs to publish")
	flag.Float64Var(&cfg.PublishRate, "rate", 8, "jobs published per second")
	flag.IntVar(&cfg.Workers, "workers", 3, "worker processes")
	flag.DurationVar(&cfg.KillEvery, "kill-every", 0, "time between two worker SIGKILLs (default 2s; with -containers 15s)")
	flag.DurationVar(&cfg.NATSDownFor, "nats-down", 0, "how long the NATS server (with -containers: a killed node) stays down (default 1s; with -containers 5s)")
	flag.DurationVar(&cfg.S3OutageFor, "s3-outage", 10*time.Second, "how long the S3 store is unavailable")
	flag.DurationVar(&cfg.Deadline, "deadline", 0, "bound of the run (default: publishing time + 3m)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the job mix and the kills (default: the clock)")
	flag.StringVar(&cfg.WorkerBin, "worker", "", "worker binary (default: build ./cmd/worker)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for the run's files, kept afterwards (default: a temporary one, removed when the run passed)")
	flag.IntVar(&cfg.FleetMediaTasks, "fleet-media-tasks", 0, "the workers' SLUICE_FLEET_MEDIA_TASKS; the report checks the simulator's peak of media tasks upstream against it (default: no fleet quota)")
	skew := flag.Duration("skew", 0, "run the workers' clocks at -skew, 0 and +skew (SLUICE_FAULT_CLOCK_OFFSET; the worker is built with -tags faults, and -worker must be such a build)")
	soak := flag.Duration("soak", 0, "a soak of this publishing time at a low rate of jobs and faults, sampling every worker's resources (make soak)")
	flag.DurationVar(&cfg.SampleEvery, "sample", time.Minute, "with -soak: time between two samples of the workers' resources")
	flag.DurationVar(&cfg.Growth.Baseline, "baseline", 0, "with -soak: the first stretch of each worker process's life that sets its bound (default: a fifth of -soak, at most 10m)")
	rssSlack := flag.Float64("rss-slack", 16, "with -soak: MiB of resident memory allowed above the baseline's highest x1.5 (a short baseline ends before the Go heap reaches its working size)")
	containers := flag.Bool("containers", false, "run on containers: a TLS three-node NATS cluster, S3 and the workers in Docker (make chaos-cluster)")
	var ct chaos.Containers
	flag.StringVar(&ct.Name, "name", "sluice-chaos", "with -containers: prefix of every container and network of the run")
	flag.StringVar(&ct.NATSConfig, "nats-config", "config/nats", "with -containers: directory of cluster-tls.conf and users.conf")
	flag.DurationVar(&ct.PauseFor, "pause", 10*time.Second, "with -containers: how long a NATS node stays paused")
	flag.DurationVar(&ct.PartitionFor, "partition", 20*time.Second, "with -containers: how long a NATS node and a worker stay cut off")
	flag.Parse()
	var tags []string
	if *skew != 0 && *containers {
		fail(fmt.Errorf("-skew runs on processes only: the worker image is a release build, which ignores SLUICE_FAULT_CLOCK_OFFSET"))
	}
	if *soak > 0 {
		if *containers {
			fail(fmt.Errorf("-soak runs on processes only: it reads each worker's /proc"))
		}
		soakConfig(&cfg, *soak)
		cfg.Growth.Slack = chaos.Resources{*rssSlack, 32, 16, 8}
	} else {
		cfg.SampleEvery = 0
	}
	if *skew != 0 {
		cfg.ClockOffsets, tags = []time.Duration{-*skew, 0, *skew}, []string{"faults"}
	}
	if *containers {
		ct.NATSImage, ct.S3Image, ct.WorkerImage = os.Getenv("SLUICE_NATS_IMAGE"), os.Getenv("SLUICE_S3_IMAGE"), os.Getenv("SLUICE_WORKER_IMAGE")
		ct.NodeDownFor = cfg.NATSDownFor
		cfg.Containers = &ct
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	keep := cfg.Dir != ""
	if !keep {
		dir, err := os.MkdirTemp("", "sluice-chaos-")
		if err != nil {
			fail(err)
		}
		cfg.Dir = dir
	}
	if cfg.WorkerBin == "" && cfg.Containers == nil {
		bin, err := chaos.BuildWorker(ctx, cfg.Dir, tags...)
		if err != nil {
			fail(err)
		}
		cfg.WorkerBin = bin
	}
	cfg.Progress = os.Stderr
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		fail(err)
	}
	printReport(rep, cfg.SampleEvery)
	if !rep.OK() || keep {
		fmt.Fprintln(os.Stderr, "chaos: files of the run (worker logs under logs/) are in", cfg.Dir)
	} else {
		_ = os.RemoveAll(cfg.Dir)
	}
	fmt.Println(rep)
	if !rep.OK() {
		os.Exit(1)
	}
}

// printReport prints each fault's recovery, a soak's series (sampled
// every sample) and the problems; the figures' line comes last.
func printReport(rep *chaos.Report, sample time.Duration) {
	for _, rec := range rep.Recoveries {
		fmt.Println("fault:", rec)
	}
	if len(rep.Series) > 0 {
		b := rep.GrowthBound
		fmt.Printf("resources every %s (bound: the first %s's highest value x %g + %v):\n%s", sample,
			b.Baseline, b.Factor, b.Slack, chaos.SeriesTable(rep.Series, rep.Growth))
	}
	for _, p := range rep.Problems {
		fmt.Println("problem:", p)
	}
}

// soakConfig sets a soak's rates where the flags left them: jobs for d
// at 2 a second, a deadline 5 minutes after the last publish, a kill a
// minute of the last worker slot only, the NATS restart and the S3 outage
// every 10 minutes (twice in a short soak), 1% 5xx and 1% 429.
func soakConfig(cfg *chaos.Config, d time.Duration) {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["rate"] {
		cfg.PublishRate = 2
	}
	if !set["jobs"] {
		cfg.Jobs = int(d.Seconds() * cfg.PublishRate)
	}
	if !set["kill-every"] {
		cfg.KillEvery = time.Minute
	}
	if !set["deadline"] {
		// A loaded machine may be slow: stuck means "not finished 5
		// minutes after the last publish", not a timing.
		cfg.Deadline = d + 5*time.Minute
	}
	if !set["baseline"] {
		cfg.Growth.Baseline = min(10*time.Minute, d/5)
	}
	cfg.Spared = cfg.Workers - 1
	cfg.FaultEvery = min(10*time.Minute, d/2)
	cfg.Error5xxRate, cfg.Error429Rate = 0.01, 0.01
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chaos:", err)
	os.Exit(2)
}
