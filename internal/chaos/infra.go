package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/devstack"
	"github.com/sluice-dev/sluice/internal/natsembed"
	"github.com/sluice-dev/sluice/internal/s3dev"
)

// Credentials of the run. They are secrets as far as the workers know: the
// harness checks that none of them shows up in a log line, an event, a
// dead letter or a state record.
const (
	mediaAPIKey     = "sk-chaos-media-7d1e0c"
	computePassword = "pw-chaos-compute-44a9"
	computeOrgID    = "org-chaos"
	s3AccessKeyID   = "chaos"
	s3Secret        = "s3-chaos-secret-9b0f"
	bucket          = "chaos"
)

// infra is the run's NATS server, S3 store and simulators, each on a fixed
// loopback port so that NATS and S3 can be stopped and started again on the
// same address and directory while the workers run.
type infra struct {
	dir string

	externalNATS string // Config.NATSURL: no server of the run's own
	natsPort     int
	mu           sync.Mutex
	nats         *natsembed.Server
	s3Addr       string
	s3           *s3dev.Server

	media   *apisim.Media
	compute *apisim.Compute
	sim     *http.Server
	simURL  string

	s3c *s3.Client
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// onFreePort calls start with a free loopback port until it succeeds, at
// most five times.
func onFreePort(start func(port int) error) error {
	var err error
	for range 5 {
		var port int
		if port, err = freePort(); err != nil {
			continue
		}
		if err = start(port); err == nil {
			return nil
		}
	}
	return err
}

func startInfra(ctx context.Context, cfg Config) (_ *infra, err error) {
	in := &infra{dir: cfg.Dir}
	defer func() {
		if err != nil {
			in.close()
		}
	}()
	// A free port may be taken by someone else before the server binds it:
	// try a few.
	if in.externalNATS = cfg.NATSURL; in.externalNATS == "" {
		err = onFreePort(func(port int) error {
			in.natsPort = port
			return in.startNATS()
		})
		if err != nil {
			return nil, fmt.Errorf("start nats: %w", err)
		}
	}
	err = onFreePort(func(port int) error {
		in.s3Addr = fmt.Sprintf("127.0.0.1:%d", port)
		return in.startS3(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("start s3: %w", err)
	}
	in.s3c = s3.New(s3.Options{
		Region:       s3dev.Region,
		BaseEndpoint: aws.String("http://" + in.s3Addr),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s3dev.AccessKeyID, s3dev.SecretAccessKey, ""),
	})

	in.media = apisim.NewMedia(apisim.MediaConfig{APIKey: mediaAPIKey, TaskDuration: 3 * time.Second})
	in.compute = apisim.NewCompute(apisim.ComputeConfig{
		User: computeUser, Password: computePassword, OrgID: computeOrgID,
		Root: filepath.Join(cfg.Dir, "compute"),
	})
	fault := apisim.Fault{Error5xxRate: cfg.Error5xxRate, Error429Rate: cfg.Error429Rate, RetryAfter: time.Second}
	in.media.Faults().Set("*", fault)
	in.compute.Faults().Set("*", fault)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("simulator listener: %w", err)
	}
	in.simURL = "http://" + ln.Addr().String()
	in.sim = &http.Server{Handler: devstack.Handler(in.media, in.compute), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = in.sim.Serve(ln) }()
	return in, nil
}

func (in *infra) natsURL() string {
	if in.externalNATS != "" {
		return in.externalNATS
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", in.natsPort)
}

func (in *infra) startNATS() error {
	srv, err := natsembed.Start(natsembed.Config{Port: in.natsPort, StoreDir: filepath.Join(in.dir, "nats")})
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.nats = srv
	in.mu.Unlock()
	return nil
}

func (in *infra) stopNATS() {
	in.mu.Lock()
	srv := in.nats
	in.nats = nil
	in.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
	}
}

// restartNATS stops the server, waits down and starts it again on the same
// port with the same store directory. A port taken meanwhile is retried
// for a while.
func (in *infra) restartNATS(ctx context.Context, down time.Duration) error {
	in.stopNATS()
	// Even a run that ends meanwhile gets its server back, to be checked.
	_ = backoff.Sleep(ctx, down)
	return retryStart(context.WithoutCancel(ctx), in.startNATS)
}

func (in *infra) startS3(ctx context.Context) error {
	srv, err := s3dev.Start(context.WithoutCancel(ctx), s3dev.Config{Dir: filepath.Join(in.dir, "s3"), Addr: in.s3Addr, Buckets: []string{bucket}})
	if err != nil {
		return err
	}
	in.mu.Lock()
	in.s3 = srv
	in.mu.Unlock()
	return nil
}

func (in *infra) stopS3() error {
	in.mu.Lock()
	srv := in.s3
	in.s3 = nil
	in.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// outageS3 stops the store for d and starts it again on the same address
// and directory.
func (in *infra) outageS3(ctx context.Context, d time.Duration) error {
	if err := in.stopS3(); err != nil {
		return fmt.Errorf("stop s3: %w", err)
	}
	// Even a run that ends meanwhile gets its store back, to be checked.
	_ = backoff.Sleep(ctx, d)
	return retryStart(context.WithoutCancel(ctx), func() error { return in.startS3(ctx) })
}

// retryStart retries start for up to 30s: a port just released may be
// briefly unavailable.
func retryStart(ctx context.Context, start func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := start()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		if serr := backoff.Sleep(ctx, 250*time.Millisecond); serr != nil {
			return errors.Join(err, serr)
		}
	}
}

func (in *infra) close() {
	if in.sim != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = in.sim.Shutdown(ctx)
		cancel()
		_ = in.sim.Close()
	}
	_ = in.stopS3()
	in.stopNATS()
}
