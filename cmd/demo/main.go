// Command demo runs sluice end to end on the embedded default (make demo):
// every job scenario, an invalid spec and a cancelled job, with their
// outcomes and artifacts checked. It exits 0 only when every outcome is the
// expected one.
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
	flag.Parse()
	x.S3AccessKeyID, x.S3SecretAccessKey = os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, os.Stdout, demo.Options{DataDir: os.Getenv("SLUICE_DEMO_DIR"), External: x}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
