package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	rpprof "runtime/pprof"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/logging"
	sluiceworker "github.com/sluice-dev/sluice/internal/worker"
)

// RunProfiledWorker is cmd/worker with net/http/pprof served on pprofAddr:
// the worker the harness starts instead of the binary when asked for
// profiles (Options.ProfileDir). The figures of a profiled run are not the
// published ones.
func RunProfiledWorker(ctx context.Context, pprofAddr string) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", pprofAddr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	stop, err := ProfileLife(os.Getenv("BENCH_WORKER_CPUPROFILE"))
	if err != nil {
		return err
	}
	defer stop()
	return sluiceworker.Run(ctx, *cfg, logging.New(os.Stderr, cfg.LogFormat, cfg.LogLevel), nil)
}

// ProfileLife starts a CPU profile of this process, written to
// path.<pid> when stop is called (a peer run starts a worker and a NATS
// server per pass, so each gets a file of its own). An empty path profiles
// nothing. bench peer's processes take the path from BENCH_WORKER_CPUPROFILE
// (the worker, with -worker naming a script that runs "bench worker") and
// BENCH_NATS_CPUPROFILE (its nats-server).
func ProfileLife(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid()))
	if err != nil {
		return nil, err
	}
	if err := rpprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { rpprof.StopCPUProfile(); f.Close() }, nil
}

// profile saves the worker's profile kind ("heap", "goroutine", or
// "profile" for CPU over d) as <ProfileDir>/<name>.pprof; it does nothing
// unless the run profiles.
func (r *run) profile(ctx context.Context, w *worker, kind string, d time.Duration, name string) error {
	if r.o.ProfileDir == "" || w.pprofAddr == "" {
		return nil
	}
	url := fmt.Sprintf("http://%s/debug/pprof/%s", w.pprofAddr, kind)
	if kind == "profile" {
		url += fmt.Sprintf("?seconds=%d", max(int(d.Seconds()), 1))
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New("profile " + kind + ": " + resp.Status)
	}
	if err := os.MkdirAll(r.o.ProfileDir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(r.o.ProfileDir, name+".pprof"))
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	return errors.Join(err, f.Close())
}
