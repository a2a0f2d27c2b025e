// Command worker is the sluice daemon: it consumes job specs from NATS
// JetStream, drives the media API and the compute platform, copies the
// results into S3 and publishes events. Configuration comes from SLUICE_*
// environment variables (see docs/configuration.md); SLUICE_DEV=true runs everything
// embedded.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/worker"
)

func main() {
	cfg, err := config.Load()
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: invalid configuration:\n%v\n", err)
		os.Exit(2)
	}
	log := logging.New(os.Stderr, cfg.LogFormat, cfg.LogLevel)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := worker.Run(ctx, *cfg, log, nil); err != nil {
		log.Error().Err(err).Msg("worker failed")
		os.Exit(1)
	}
}
