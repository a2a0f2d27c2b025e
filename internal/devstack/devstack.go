// Package devstack runs the embedded default (SLUICE_DEV=true): a real NATS
// server with JetStream, an S3-compatible store whose objects are plain
// files, and the media and compute simulators, all inside the worker's
// process and on loopback addresses, so sluice runs end to end on a
// machine with nothing else installed.
package devstack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/natsembed"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// Credentials the simulators accept and the worker uses in dev mode. They
// guard nothing: every service listens on loopback only.
const (
	MediaAPIKey     = "dev-media-key"
	ComputeUser     = "dev"
	ComputePassword = "dev-password"
	ComputeOrgID    = "dev-org"
	// ComputeAccessKey and ComputeSecretKey are the AK/SK login the dev
	// worker uses (the simulator runs in platform mode).
	ComputeAccessKey = "dev-access-key"
	ComputeSecretKey = "dev-secret-key"
	Bucket           = "sluice"
)

// Config configures the stack.
type Config struct {
	// DataDir holds NATS's store (nats/), the S3 objects (s3/), the
	// compute simulator's file tree (compute/) and the simulators' tasks
	// and jobs (sim/). Required.
	DataDir string
	// NATSPort is the NATS client port on 127.0.0.1; -1 picks a free one.
	// Defaults to 4222.
	NATSPort int
	// S3Addr is the S3 store's loopback host:port; port 0 picks a free
	// one. Defaults to s3dev.DefaultAddr (127.0.0.1:7070).
	S3Addr string
	// Bucket is the artifact bucket to create. Defaults to "sluice".
	Bucket string
	// TaskTime is how long a simulated media task takes. Defaults to 3s.
	TaskTime time.Duration
	// ComputeTime is how long a simulated compute job runs. Defaults to 4s.
	ComputeTime time.Duration
}

// Stack is the running embedded default.
type Stack struct {
	NATS    *natsembed.Server
	S3      *s3dev.Server
	Media   *apisim.Media
	Compute *apisim.Compute
	// SimURL is the base URL of both simulators.
	SimURL string
	Bucket string

	sim  *http.Server
	lock *os.File
}

// Start starts every part; on error nothing is left running.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	if cfg.DataDir == "" {
		return nil, errors.New("devstack: DataDir is required")
	}
	s := &Stack{Bucket: cmp.Or(cfg.Bucket, Bucket)}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.lock, err = lockDataDir(cfg.DataDir); err != nil {
		return nil, err
	}
	s.NATS, err = natsembed.Start(natsembed.Config{Port: cmp.Or(cfg.NATSPort, 4222), StoreDir: filepath.Join(cfg.DataDir, "nats")})
	if err != nil {
		return nil, err
	}
	s.S3, err = s3dev.Start(ctx, s3dev.Config{
		Dir: filepath.Join(cfg.DataDir, "s3"), Addr: cmp.Or(cfg.S3Addr, s3dev.DefaultAddr), Buckets: []string{s.Bucket},
	})
	if err != nil {
		return nil, fmt.Errorf("devstack: s3 store: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("devstack: simulator listener: %w", err)
	}
	s.SimURL = "http://" + ln.Addr().String()
	// The simulators keep their tasks and jobs under sim/, so a restarted
	// dev worker resumes a job whose task or compute job is in flight.
	s.Media = apisim.NewMedia(apisim.MediaConfig{
		APIKey: MediaAPIKey, TaskDuration: cmp.Or(cfg.TaskTime, 3*time.Second), ResultSize: 256 << 10,
		StateFile: filepath.Join(cfg.DataDir, "sim", "media.json"),
	})
	s.Compute = apisim.NewCompute(apisim.ComputeConfig{
		User: ComputeUser, Password: ComputePassword, OrgID: ComputeOrgID,
		AccessKey: ComputeAccessKey, SecretKey: ComputeSecretKey,
		BaseURL: s.SimURL, Root: filepath.Join(cfg.DataDir, "compute"),
		QueuedFor: time.Second, RunFor: cmp.Or(cfg.ComputeTime, 4*time.Second),
		StateFile: filepath.Join(cfg.DataDir, "sim", "compute.json"),
	})
	if err := errors.Join(s.Media.StateErr(), s.Compute.StateErr()); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("devstack: simulators: %w", err)
	}
	s.sim = &http.Server{Handler: Handler(s.Media, s.Compute), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.sim.Serve(ln) }()
	return s, nil
}

// Handler serves both simulators on one address: the compute platform's
// paths (/ac/, /api/user/, /efile/, /hpc/, /ai/) and the media API's
// (everything else).
func Handler(media *apisim.Media, compute *apisim.Compute) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range []string{"/ac/", "/api/user/", "/efile/", "/hpc/", "/ai/"} {
			if strings.HasPrefix(r.URL.Path, p) {
				compute.ServeHTTP(w, r)
				return
			}
		}
		media.ServeHTTP(w, r)
	})
}

// Close stops every part that was started.
func (s *Stack) Close() {
	if s.sim != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.sim.Shutdown(ctx)
		cancel()
	}
	if s.Compute != nil {
		_ = s.Compute.Close()
	}
	if s.S3 != nil {
		_ = s.S3.Close()
	}
	if s.NATS != nil {
		s.NATS.Shutdown()
	}
	// Last: the directory is free only once nothing uses it.
	if s.lock != nil {
		_ = s.lock.Close()
	}
}
