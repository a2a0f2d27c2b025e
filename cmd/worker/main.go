// Command worker is the sluice daemon: it consumes job specs from NATS
// JetStream, drives the media API and the compute platform, copies the
// results into S3 and publishes events. Configuration comes from SLUICE_*
// environment variables ("worker --help" lists them, docs/configuration.md
// explains them); SLUICE_DEV=true runs everything embedded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/worker"
)

// Exit codes of the worker.
const (
	exitOK      = 0
	exitFailed  = 1 // the worker failed while running
	exitInvalid = 2 // bad flags or an invalid configuration
)

func main() {
	if code, done := flags(os.Args[1:], os.Stdout, os.Stderr); done {
		os.Exit(code)
	}
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: invalid configuration:\n%v\n", err)
		os.Exit(exitInvalid)
	}
	log := logging.New(os.Stderr, cfg.LogFormat, cfg.LogLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := worker.Run(ctx, *cfg, log, nil); err != nil {
		log.Error().Err(err).Msg("worker failed")
		os.Exit(exitFailed)
	}
}

// flags handles the command line: --help and --version answer and end the
// run (done), anything else but no arguments is a usage error.
func flags(args []string, stdout, stderr io.Writer) (code int, done bool) {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	version := fs.Bool("version", false, "print the version and exit")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout)
		return exitOK, true
	case err != nil:
		fmt.Fprintf(stderr, "worker: %v (see worker --help)\n", err)
		return exitInvalid, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "worker: unexpected argument %q: the worker is configured by SLUICE_* environment variables (see worker --help)\n", fs.Arg(0))
		return exitInvalid, true
	case *version:
		fmt.Fprintf(stdout, "worker %s\n", buildinfo.Read())
		return exitOK, true
	}
	return exitOK, false
}

func usage(w io.Writer) {
	fmt.Fprint(w, `worker is the sluice daemon: it consumes job specs from NATS JetStream,
drives the media API and the compute platform, copies every result into S3
and publishes one terminal event per job.

Usage:
  worker              run until SIGTERM or SIGINT, then stop gracefully
  worker --version    print the module version and VCS commit
  worker --help       print this help

It is configured by environment variables, read once at start; every
invalid value is reported by name and the worker exits 2. SLUICE_DEV=true
runs the embedded default (NATS, an S3 store and both simulators inside
the process, data under SLUICE_DATA_DIR) with faster poll defaults, shown
as "dev:" below; a variable that is set always wins. AWS credentials come
from the standard AWS chain. docs/configuration.md in sluice's repository
says what each variable means.

Environment:
`)
	_ = config.Usage(w)
	fmt.Fprint(w, `
Try it:
  SLUICE_DEV=true SLUICE_LOG_FORMAT=console worker

Exit codes:
  0  stopped gracefully (also when stopped while still connecting)
  1  the worker failed
  2  bad flags or an invalid configuration
`)
}
