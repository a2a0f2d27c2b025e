// Command riverpeer is the River + Postgres peer of sluice's benchmarks
// (BENCHMARKS.md, "sluice and River"): a River worker doing the same work as
// a sluice video job, and the small tools the harness (cmd/bench, "bench
// peer") drives it with. It is a Go module of its own, so that River and
// pgx stay out of sluice's go.mod; it imports nothing from sluice.
//
//	riverpeer db -url URL -create NAME | -drop NAME   create (and migrate) or drop a database
//	riverpeer work -db URL -media URL -s3 URL -bucket B     run the worker until SIGTERM
//	riverpeer drive -db URL -n N -prefix P [-one-by-one]    enqueue N jobs, wait for them, print RESULT
//
// The media API key and the S3 credentials come from the environment
// (MEDIA_API_KEY, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION),
// never from the command line.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: riverpeer db|work|drive [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "db":
		err = runDB(ctx, args)
	case "work":
		err = runWork(ctx, args)
	case "drive":
		err = runDrive(ctx, args)
	default:
		err = fmt.Errorf("unknown subcommand %q (want db, work or drive)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "riverpeer:", err)
		os.Exit(1)
	}
}
