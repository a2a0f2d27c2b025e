package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/cli"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/natsembed"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// Credentials of the bench's simulator and store; they guard nothing, every
// part listens on loopback.
const (
	mediaAPIKey = "bench-media-key"
	bucket      = "sluice-bench"
)

// stack is one scenario's surroundings, in the harness process: an
// embedded NATS server with the contract's streams, the S3-compatible store
// (in this process, or an endpoint served elsewhere) and the media API
// simulator over HTTP.
type stack struct {
	dir        string
	nats       *natsembed.Server
	natsURL    string
	nc         *nats.Conn
	js         jetstream.JetStream
	s3         *s3dev.Server
	s3Endpoint string
	media      *apisim.Media
	sim        *http.Server
	simURL     string
	// timeline, when set, stamps every step of the jobs oneByOne runs.
	timeline *timeline
}

// stackOptions tunes a stack.
type stackOptions struct {
	// ExternalS3 leaves the store to another process: the caller sets
	// s3Endpoint before starting a worker. By default the embedded store
	// runs in this process.
	ExternalS3 bool
	// NATSURL is a NATS server in another process ("bench natsserve") to
	// use instead of an embedded one in this process.
	NATSURL string
	// SimURL is a media API simulator already serving (with the bench's
	// API key) to use instead of a new one; Media is then ignored.
	SimURL string
	// Media configures the simulator; APIKey is set by the stack.
	Media apisim.MediaConfig
	// Timeline, when set, is tapped into the stack's NATS server, its
	// simulator and its store (the ones in this process).
	Timeline *timeline
}

// newStack starts a stack with its files under dir.
func newStack(ctx context.Context, dir string, o stackOptions) (_ *stack, err error) {
	s := &stack{dir: dir}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s.natsURL = o.NATSURL
	if s.natsURL == "" {
		if s.nats, err = natsembed.Start(natsembed.Config{Port: -1, StoreDir: filepath.Join(dir, "nats")}); err != nil {
			return nil, err
		}
		s.natsURL = s.nats.ClientURL()
	}
	if s.nc, err = nats.Connect(s.natsURL, nats.Name("sluice-bench")); err != nil {
		return nil, err
	}
	var simFront, s3Front func(http.Handler) http.Handler
	if s.timeline = o.Timeline; s.timeline != nil {
		if err := s.timeline.tap(s.nc); err != nil {
			return nil, err
		}
		simFront, s3Front = s.timeline.front("sim", simRequest), s.timeline.front("s3", s3Request)
	}
	if s.js, err = jetstream.New(s.nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		return nil, err
	}
	if err := contract.Ensure(ctx, s.js, contract.Options{}); err != nil {
		return nil, err
	}
	if !o.ExternalS3 {
		if s.s3, err = s3dev.Start(ctx, s3dev.Config{Dir: filepath.Join(dir, "s3"), Buckets: []string{bucket}, Front: s3Front}); err != nil {
			return nil, err
		}
		s.s3Endpoint = s.s3.Endpoint()
	}
	if s.simURL = o.SimURL; s.simURL == "" {
		s.media, s.sim, s.simURL, err = startSimulator(o.Media, simFront)
	}
	return s, err
}

// startSimulator serves the media API simulator with cfg (its APIKey set to
// the bench's) on a loopback port, in this process, behind front if set.
func startSimulator(cfg apisim.MediaConfig, front func(http.Handler) http.Handler) (*apisim.Media, *http.Server, string, error) {
	cfg.APIKey = mediaAPIKey
	media := apisim.NewMedia(cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, "", err
	}
	var h http.Handler = media
	if front != nil {
		h = front(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return media, srv, "http://" + ln.Addr().String(), nil
}

// stopSimulator shuts a simulator's server down.
func stopSimulator(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(ctx)
	cancel()
}

// close stops every part that was started.
func (s *stack) close() {
	if s.timeline != nil {
		s.timeline.close()
	}
	if s.sim != nil {
		stopSimulator(s.sim)
	}
	if s.s3 != nil {
		_ = s.s3.Close()
	}
	if s.nc != nil {
		s.nc.Close()
	}
	if s.nats != nil {
		s.nats.Shutdown()
	}
}

// workerEnv is the environment of a worker process (or a floor process)
// pointed at the stack, before a scenario's own settings.
func (s *stack) workerEnv() map[string]string {
	return map[string]string{
		"SLUICE_NATS_URL":           s.natsURL,
		"SLUICE_KINDS":              "video",
		"SLUICE_S3_ENDPOINT":        s.s3Endpoint,
		"SLUICE_S3_BUCKET":          bucket,
		"SLUICE_S3_PATH_STYLE":      "true",
		"SLUICE_MEDIA_BASE_URL":     s.simURL,
		"SLUICE_MEDIA_API_KEY":      mediaAPIKey,
		"SLUICE_ALLOW_PRIVATE_URLS": "true",
		"SLUICE_LOG_LEVEL":          "info",
		"AWS_ACCESS_KEY_ID":         s3dev.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":     s3dev.SecretAccessKey,
		"AWS_REGION":                s3dev.Region,
		"AWS_EC2_METADATA_DISABLED": "true",
	}
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// enqueue runs the enqueue CLI in this process against the stack's NATS
// and returns its standard output.
func (s *stack) enqueue(ctx context.Context, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	env := cli.Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string {
			if k == "SLUICE_NATS_URL" {
				return s.natsURL
			}
			return ""
		},
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now,
	}
	if code := cli.Run(ctx, args, env); code != 0 {
		return out.String(), fmt.Errorf("enqueue %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}
