// Command chaos runs sluice's reliability scenario (package chaos): a fleet
// of worker processes, one killed every few seconds, the NATS server
// restarted, the S3 store taken away, the upstream simulators failing and
// rate limiting; then it checks every job and prints the run's figures as
// its last line. It exits 1 when a promise was broken.
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
	flag.DurationVar(&cfg.KillEvery, "kill-every", 2*time.Second, "time between two SIGKILLs")
	flag.DurationVar(&cfg.NATSDownFor, "nats-down", time.Second, "how long the NATS server stays down when it is restarted")
	flag.DurationVar(&cfg.S3OutageFor, "s3-outage", 10*time.Second, "how long the S3 store is unavailable")
	flag.DurationVar(&cfg.Deadline, "deadline", 0, "bound of the run (default: publishing time + 3m)")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the job mix and the kills (default: the clock)")
	flag.StringVar(&cfg.WorkerBin, "worker", "", "worker binary (default: build ./cmd/worker)")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for the run's files, kept afterwards (default: a temporary one, removed when the run passed)")
	flag.Parse()

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
	if cfg.WorkerBin == "" {
		bin, err := chaos.BuildWorker(ctx, cfg.Dir)
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
	for _, p := range rep.Problems {
		fmt.Println("problem:", p)
	}
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

func fail(err error) {
	fmt.Fprintln(os.Stderr, "chaos:", err)
	os.Exit(2)
}
