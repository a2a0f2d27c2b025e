// Command simulator serves the media API and compute platform simulators on
// one address, for local trials, benchmarks and the compose stack. Both
// APIs speak the upstream wire format; see internal/apisim for the
// [sim:...] prompt directives and #SIM script directives that steer them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/devstack"
)

func main() {
	addr := flag.String("addr", envOr("SIM_ADDR", "127.0.0.1:8080"), "listen address (SIM_ADDR)")
	baseURL := flag.String("base-url", os.Getenv("SIM_BASE_URL"), "URL clients reach this server at, for the compute center's addresses (SIM_BASE_URL; default: from each request's Host)")
	apiKey := flag.String("media-api-key", envOr("SIM_MEDIA_API_KEY", devstack.MediaAPIKey), "bearer key the media API accepts (SIM_MEDIA_API_KEY)")
	user := flag.String("compute-user", envOr("SIM_COMPUTE_USER", devstack.ComputeUser), "compute user (SIM_COMPUTE_USER)")
	password := flag.String("compute-password", envOr("SIM_COMPUTE_PASSWORD", devstack.ComputePassword), "compute password (SIM_COMPUTE_PASSWORD)")
	org := flag.String("compute-orgid", envOr("SIM_COMPUTE_ORGID", devstack.ComputeOrgID), "compute org id (SIM_COMPUTE_ORGID)")
	accessKey := flag.String("compute-access-key", envOr("SIM_COMPUTE_ACCESS_KEY", devstack.ComputeAccessKey), "compute AK/SK login access key (SIM_COMPUTE_ACCESS_KEY)")
	secretKey := flag.String("compute-secret-key", envOr("SIM_COMPUTE_SECRET_KEY", devstack.ComputeSecretKey), "compute AK/SK login secret key (SIM_COMPUTE_SECRET_KEY)")
	letter := flag.Bool("compute-letter", os.Getenv("SIM_COMPUTE_LETTER") == "true", "follow compute-api.md to the letter instead of the platform's behaviour (SIM_COMPUTE_LETTER=true)")
	mediaLetter := flag.Bool("media-letter", os.Getenv("SIM_MEDIA_LETTER") == "true", "follow media-api.md to the letter instead of the platform's behaviour: video resolutions 768P and 2K only (SIM_MEDIA_LETTER=true)")
	taskTime := flag.Duration("task-time", 3*time.Second, "how long a media task takes")
	concurrency := flag.Int("media-concurrency", envInt("SIM_MEDIA_CONCURRENCY"), "media tasks pending or running at once past which a submit is answered 433 with code 10007 (SIM_MEDIA_CONCURRENCY; default 0, no limit)")
	resultSize := flag.Int64("result-size", 256<<10, "bytes of each media result")
	runFor := flag.Duration("compute-time", 4*time.Second, "how long a compute job runs")
	root := flag.String("compute-root", os.Getenv("SIM_COMPUTE_ROOT"), "directory of the compute file tree (SIM_COMPUTE_ROOT; default a temporary one)")
	flag.Parse()

	media := apisim.NewMedia(apisim.MediaConfig{APIKey: *apiKey, TaskDuration: *taskTime, ResultSize: *resultSize, ResultBaseURL: *baseURL,
		Letter: *mediaLetter, ConcurrencyLimit: *concurrency})
	compute := apisim.NewCompute(apisim.ComputeConfig{
		User: *user, Password: *password, OrgID: *org, AccessKey: *accessKey, SecretKey: *secretKey,
		BaseURL: *baseURL, Letter: *letter,
		QueuedFor: time.Second, RunFor: *runFor, Root: *root,
	})
	defer compute.Close()
	srv := &http.Server{Addr: *addr, Handler: devstack.Handler(media, compute), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	fmt.Fprintf(os.Stderr, "simulator: media API and compute platform on http://%s\n", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, "simulator:", err)
		os.Exit(1)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envInt reads a non-negative integer variable (0 when unset); a bad value
// stops the simulator naming the variable.
func envInt(name string) int {
	v := os.Getenv(name)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		fmt.Fprintf(os.Stderr, "simulator: %s=%q: want a whole number of 0 or more\n", name, v)
		os.Exit(2)
	}
	return n
}
