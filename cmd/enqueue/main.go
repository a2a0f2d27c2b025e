// Command enqueue publishes sluice jobs, waits for them, shows their state,
// cancels them and tails their events. Run "enqueue --help" for usage.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-dev/sluice/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], cli.OSEnv())
	stop()
	os.Exit(code)
}
