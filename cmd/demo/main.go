// Command demo runs sluice end to end on the embedded default (make demo):
// every job scenario, an invalid spec and a cancelled job, with their
// outcomes and artifacts checked. It exits 0 only when every outcome is the
// expected one.
//
// It prints the address of the web console, on a free port unless -http,
// DEMO_HTTP or SLUICE_HTTP_ADDR names one; a worker that cannot start is
// reported and the demo exits 1. Ctrl-C or SIGTERM stops it at any point
// and removes its temporary directory.
//
// With -keep the embedded
// default stays up after the jobs, console and NATS included, until Ctrl-C
// (make demo-keep).
//
// With -nats-url it runs the same jobs against a sluice that is already
// running with the simulators instead (make compose-demo): -s3-endpoint
// and -s3-bucket name the artifact store, whose credentials come from
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-dev/sluice/internal/demo"
)

func main() {
	var x demo.External
	flag.StringVar(&x.NATSURL, "nats-url", "", "run against the sluice on this NATS server instead of the embedded default")
	flag.StringVar(&x.S3Endpoint, "s3-endpoint", "http://127.0.0.1:7070", "with -nats-url: the S3 endpoint of the workers' bucket")
	flag.StringVar(&x.S3Bucket, "s3-bucket", "sluice", "with -nats-url: the workers' bucket (SLUICE_S3_BUCKET)")
	flag.StringVar(&x.S3Region, "s3-region", "us-east-1", "with -nats-url: the bucket's region")
	keep := flag.Bool("keep", false, "leave the embedded default running after the jobs, with its web console, until Ctrl-C")
	httpAddr := flag.String("http", os.Getenv("DEMO_HTTP"), "address of the worker's /metrics and web console (default: DEMO_HTTP, else SLUICE_HTTP_ADDR, else a free port on 127.0.0.1)")
	flag.Parse()
	x.S3AccessKeyID, x.S3SecretAccessKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The first Ctrl-C or SIGTERM stops the demo cleanly (its worker
	// stopped, its temporary directory removed); a second one, while that
	// runs, ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := demo.Run(ctx, os.Stdout, demo.Options{DataDir: os.Getenv("SLUICE_DEMO_DIR"), External: x, Keep: *keep, HTTPAddr: *httpAddr}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
