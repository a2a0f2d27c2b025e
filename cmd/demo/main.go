// Command demo runs sluice end to end on the embedded default (make demo):
// every job scenario, an invalid spec and a cancelled job, with their
// outcomes and artifacts checked. It exits 0 only when every outcome is the
// expected one.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-dev/sluice/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, os.Stdout, demo.Options{DataDir: os.Getenv("SLUICE_DEMO_DIR")}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
