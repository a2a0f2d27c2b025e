// Command bench runs sluice's benchmarks against their floors (see
// BENCHMARKS.md and internal/bench). "bench run" measures every figure and
// prints a Markdown report; "bench peer" runs sluice and its River +
// Postgres peer (bench/riverpeer) side by side and prints their table;
// "bench container" runs container jobs one at a time through a worker in
// the bench's own process against the compute simulator and prints their
// upstream calls and the worker's latencies around the platform's. The other
// subcommands are the helper processes they start: "floor" (the bare
// floor pipeline), "natsserve" (NATS in a process of its own, for bench
// peer), "s3serve" (the embedded S3
// store in a process of its own, for -p4-store embedded), "upload" (a
// direct transfer-manager upload) and "worker" (cmd/worker with pprof, for
// -profile runs). P4's default store is versitygw (-versitygw, by default
// the versitygw binary next to this one).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd := "run"
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-") {
		cmd, os.Args = os.Args[1], append(os.Args[:1:1], os.Args[2:]...)
	}
	var err error
	switch cmd {
	case "run":
		err = runBench(ctx)
	case "floor":
		err = runFloor(ctx)
	case "peer":
		err = runPeer(ctx)
	case "natsserve":
		err = runNATS(ctx)
	case "s3serve":
		err = runS3(ctx)
	case "upload":
		err = runUpload(ctx)
	case "container":
		err = runContainer(ctx)
	case "worker":
		pprofAddr := flag.String("pprof", "127.0.0.1:0", "address of net/http/pprof")
		flag.Parse()
		err = bench.RunProfiledWorker(ctx, *pprofAddr)
	default:
		err = fmt.Errorf("unknown subcommand %q (want run, peer, container, floor, natsserve, s3serve, upload or worker)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func runBench(ctx context.Context) error {
	workerBin := flag.String("worker", "bin/worker", "the built cmd/worker binary")
	dir := flag.String("dir", "", "directory for the run's files and logs (default: a new temporary directory, removed after a successful run)")
	quick := flag.Bool("quick", false, "smoke variant: smaller counts and sizes, same code paths")
	only := flag.String("only", "", "comma-separated figures to run (P1,P2,P3,P4,P5,H1,Q1,F1,Q2,T1,U1,W1,W2,C1,B1); default all but B1")
	backlog := flag.Int("backlog", 0, "B1's backlog in jobs (default 1000000, 20000 with -quick)")
	backlogModes := flag.String("backlog-modes", "", "B1's modes, fifo (no tenant settings) and fair (fair scheduling), comma-separated (default both, fair alone with -quick)")
	outage := flag.Duration("webhook-outage", 0, "how long W2's receiver is down (default 10m, 20s with -quick)")
	out := flag.String("out", "", "also write the Markdown report to this file")
	profiles := flag.String("profile", "", "run the worker with pprof and save profiles of P1 and P3 in this directory (not for the figures)")
	p4Store := flag.String("p4-store", "versitygw", "P4's S3 store: versitygw (its posix backend) or embedded (internal/s3dev)")
	versitygw := flag.String("versitygw", "", "the versitygw binary for P4 (default: versitygw next to this binary, as make bench builds it)")
	flag.Parse()
	if *p4Store != "versitygw" && *p4Store != "embedded" {
		return fmt.Errorf("-p4-store %q: want versitygw or embedded", *p4Store)
	}
	vgw := *versitygw
	if vgw != "" {
		var err error
		if vgw, err = filepath.Abs(vgw); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	wb, err := filepath.Abs(*workerBin)
	if err != nil {
		return err
	}
	keep := *dir != ""
	if !keep {
		if *dir, err = os.MkdirTemp("", "sluice-bench-"); err != nil {
			return err
		}
	}
	o := bench.Options{WorkerBin: wb, Self: self, Dir: *dir, Quick: *quick, ProfileDir: *profiles, P4Store: *p4Store, VersityGW: vgw, Progress: os.Stderr,
		WebhookOutage: *outage, Backlog: *backlog}
	if *only != "" {
		o.Only = strings.Split(strings.ToUpper(*only), ",")
	}
	if *backlogModes != "" {
		o.BacklogModes = strings.Split(*backlogModes, ",")
	}
	rep, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := writeReport(*out, rep.WriteMarkdown); err != nil {
		return err
	}
	failed := false
	for _, f := range rep.Figures {
		failed = failed || f.Err != ""
	}
	if failed || keep {
		fmt.Fprintf(os.Stderr, "bench: files and logs kept in %s\n", *dir)
		if failed {
			return fmt.Errorf("some figures could not be measured")
		}
		return nil
	}
	return os.RemoveAll(*dir)
}

// writeReport writes a report to stdout and, when out is set, to that file.
func writeReport(out string, write func(io.Writer)) error {
	write(os.Stdout)
	if out == "" {
		return nil
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	write(f)
	return f.Close()
}

func runFloor(ctx context.Context) error {
	var cfg bench.FloorConfig
	flag.StringVar(&cfg.NATSURL, "nats", "", "NATS URL")
	flag.StringVar(&cfg.MediaURL, "media", "", "media API base URL")
	flag.StringVar(&cfg.MediaAPIKey, "media-key", "", "media API key")
	flag.StringVar(&cfg.S3Endpoint, "s3", "", "S3 endpoint")
	flag.StringVar(&cfg.Bucket, "bucket", "", "bucket")
	flag.IntVar(&cfg.Concurrency, "concurrency", 256, "jobs held at once")
	flag.Parse()
	return bench.RunFloor(ctx, cfg, func() { fmt.Println("READY") })
}

func runPeer(ctx context.Context) error {
	var o bench.PeerOptions
	flag.StringVar(&o.WorkerBin, "worker", "bin/worker", "the built cmd/worker binary")
	flag.StringVar(&o.RiverPeer, "riverpeer", "", "the built bench/riverpeer binary (default: riverpeer next to this binary, as make riverpeer builds it)")
	flag.StringVar(&o.VersityGW, "versitygw", "", "the versitygw binary (default: versitygw next to this binary)")
	flag.StringVar(&o.PostgresBin, "postgres", bench.DefaultPostgresBin, "directory of initdb and postgres, or of <version>/bin (Debian's postgresql package)")
	flag.IntVar(&o.Pairs, "pairs", 6, "pairs of passes, alternating which side goes first")
	flag.IntVar(&o.Jobs, "jobs", 2000, "quick jobs per pass")
	flag.IntVar(&o.LatencyJobs, "latency-jobs", 50, "jobs run one at a time per pass for the latency")
	flag.StringVar(&o.Label, "label", "", "what is measured, printed with the table (e.g. a commit)")
	dir := flag.String("dir", "", "directory for the run's files and logs (default: a new temporary directory, removed after a successful run)")
	out := flag.String("out", "", "also write the Markdown table to this file")
	flag.Parse()
	var err error
	if o.WorkerBin, err = filepath.Abs(o.WorkerBin); err != nil {
		return err
	}
	if o.Self, err = os.Executable(); err != nil {
		return err
	}
	keep := *dir != ""
	if !keep {
		if *dir, err = os.MkdirTemp("", "sluice-bench-peer-"); err != nil {
			return err
		}
	}
	o.Dir, o.Progress = *dir, os.Stderr
	rep, err := bench.RunPeer(ctx, o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: files and logs kept in %s\n", *dir)
		return err
	}
	if err := writeReport(*out, rep.WriteMarkdown); err != nil {
		return err
	}
	if keep {
		fmt.Fprintf(os.Stderr, "bench: files and logs kept in %s\n", *dir)
		return nil
	}
	return os.RemoveAll(*dir)
}

func runNATS(ctx context.Context) error {
	dir := flag.String("dir", "", "directory of JetStream's files")
	flag.Parse()
	stop, err := bench.ProfileLife(os.Getenv("BENCH_NATS_CPUPROFILE"))
	if err != nil {
		return err
	}
	defer stop()
	return bench.ServeNATS(ctx, *dir, func(url string) { fmt.Println("READY", url) })
}

func runS3(ctx context.Context) error {
	dir := flag.String("dir", "", "directory of the store's files")
	flag.Parse()
	return bench.ServeS3(ctx, *dir, func(endpoint string) { fmt.Println("READY", endpoint) })
}

func runUpload(ctx context.Context) error {
	var o bench.DirectUpload
	flag.StringVar(&o.URL, "url", "", "URL to download")
	flag.StringVar(&o.S3Endpoint, "s3", "", "S3 endpoint")
	flag.StringVar(&o.Bucket, "bucket", "", "bucket")
	flag.StringVar(&o.Key, "key", "", "object key")
	flag.Int64Var(&o.PartSize, "part-size", 8<<20, "part size in bytes")
	flag.IntVar(&o.Concurrency, "concurrency", 2, "parts uploaded at once")
	flag.Parse()
	res, err := bench.RunDirectUpload(ctx, o)
	if err != nil {
		return err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	fmt.Println("RESULT", string(b))
	return nil
}

func runContainer(ctx context.Context) error {
	var o bench.ContainerOptions
	flag.IntVar(&o.Jobs, "jobs", 10, "container jobs, run one after the other")
	flag.DurationVar(&o.QueuedFor, "queued", time.Second, "how long an instance waits and deploys before its script starts")
	flag.DurationVar(&o.RunFor, "run", 2*time.Second, "how long the script runs")
	flag.DurationVar(&o.ComputePoll, "poll", 500*time.Millisecond, "the worker's SLUICE_COMPUTE_POLL_INTERVAL")
	flag.Parse()
	dir, err := os.MkdirTemp("", "sluice-bench-container-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o.Dir = dir
	f, err := bench.Container(ctx, o)
	if err != nil {
		return err
	}
	bench.WriteContainer(os.Stdout, f)
	return nil
}
