package chaos

import (
	"cmp"
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
	"github.com/nats-io/nats.go"

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

// The container faults of a run besides the simulators' error rates.
const (
	containerLostCreateRate = 0.05
	containerRefusedDeletes = 5
)

// infra is the run's NATS server, S3 store and simulators, each on a fixed
// loopback port so that NATS and S3 can be stopped and started again on the
// same address and directory while the workers run. In a container run,
// cl holds the NATS cluster and the S3 gateway instead, and the simulators
// listen where the containers reach them.
type infra struct {
	dir string
	cl  *cluster

	natsPort int
	// externalNATS is Config.NATSURL: the caller's NATS, no server of the
	// run's own; externalReplicas its Config.Replicas.
	externalNATS     string
	externalReplicas int
	mu               sync.Mutex
	nats             *natsembed.Server
	s3Addr           string
	s3               *s3dev.Server

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
	if cfg.Containers != nil {
		if in.cl, err = startCluster(ctx, cfg); err != nil {
			return nil, err
		}
		in.s3c = s3.New(s3.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(fmt.Sprintf("http://127.0.0.1:%d", in.cl.s3Port)),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider(s3AccessKeyID, s3Secret, ""),
		})
		if _, err := in.s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
			return nil, fmt.Errorf("create bucket: %w", err)
		}
	} else if err := in.startLocal(ctx, cfg); err != nil {
		return nil, err
	}

	// The containers reach the simulators through the Docker host, every
	// worker process on loopback.
	listen, host := "127.0.0.1:0", ""
	if in.cl != nil {
		listen, host = ":0", hostAlias
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("simulator listener: %w", err)
	}
	in.simURL = "http://" + ln.Addr().String()
	if host != "" {
		in.simURL = fmt.Sprintf("http://%s:%d", host, ln.Addr().(*net.TCPAddr).Port)
	}
	mediaCfg := apisim.MediaConfig{APIKey: mediaAPIKey, TaskDuration: 3 * time.Second}
	computeCfg := apisim.ComputeConfig{
		User: computeUser, Password: computePassword, OrgID: computeOrgID,
		Root: filepath.Join(cfg.Dir, "compute"),
	}
	if in.cl != nil {
		// Presigned inputs name the gateway as the containers reach it
		// (s3:7070), which does not resolve here: the workers' preflight
		// checks them, the simulator does not fetch them.
		mediaCfg.ResultBaseURL, mediaCfg.SkipInputChecks = in.simURL, true
		computeCfg.BaseURL = in.simURL
	}
	in.media = apisim.NewMedia(mediaCfg)
	in.compute = apisim.NewCompute(computeCfg)
	fault := apisim.Fault{Error5xxRate: cfg.Error5xxRate, Error429Rate: cfg.Error429Rate, RetryAfter: time.Second}
	in.media.Faults().Set("*", fault)
	in.compute.Faults().Set("*", fault)
	// Container creates also lose their answer after the instance exists
	// (the worker finds it by name), and the first deletes are refused
	// (the job is redelivered to delete again).
	lostCreate := fault
	lostCreate.Error500AfterRate = containerLostCreateRate
	in.compute.Faults().Set(apisim.EndpointContainerCreate, lostCreate)
	in.compute.FailContainerDeletes(containerRefusedDeletes)
	in.sim = &http.Server{Handler: devstack.Handler(in.media, in.compute), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = in.sim.Serve(ln) }()
	return in, nil
}

// startLocal starts the embedded NATS server and the S3 store.
// With cfg.NATSURL the caller's NATS is used instead of a server.
func (in *infra) startLocal(ctx context.Context, cfg Config) error {
	in.externalNATS, in.externalReplicas = cfg.NATSURL, cmp.Or(cfg.Replicas, 1)
	if in.externalNATS == "" {
		// A free port may be taken by someone else before the server
		// binds it: try a few.
		err := onFreePort(func(port int) error {
			in.natsPort = port
			return in.startNATS()
		})
		if err != nil {
			return fmt.Errorf("start nats: %w", err)
		}
	}
	err := onFreePort(func(port int) error {
		in.s3Addr = fmt.Sprintf("127.0.0.1:%d", port)
		return in.startS3(ctx)
	})
	if err != nil {
		return fmt.Errorf("start s3: %w", err)
	}
	in.s3c = s3.New(s3.Options{
		Region:       s3dev.Region,
		BaseEndpoint: aws.String("http://" + in.s3Addr),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s3dev.AccessKeyID, s3dev.SecretAccessKey, ""),
	})
	return nil
}

// natsURL is where the harness connects, with natsOptions.
func (in *infra) natsURL() string {
	if in.cl != nil {
		return in.cl.adminURL()
	}
	if in.externalNATS != "" {
		return in.externalNATS
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", in.natsPort)
}

func (in *infra) natsOptions() []nats.Option {
	if in.cl != nil {
		return in.cl.adminOptions()
	}
	return nil
}

// replicas is the replica count of the streams and buckets.
func (in *infra) replicas() int {
	if in.cl != nil {
		return 3
	}
	if in.externalNATS != "" {
		return in.externalReplicas
	}
	return 1
}

// workerNATSURL and workerS3Endpoint are NATS and S3 as the workers reach
// them.
func (in *infra) workerNATSURL() string {
	if in.cl != nil {
		return in.cl.workerNATSURL()
	}
	return in.natsURL()
}

func (in *infra) workerS3Endpoint() string {
	if in.cl != nil {
		return "http://s3:7070"
	}
	return "http://" + in.s3Addr
}

// secrets are the run's credentials besides the upstream ones: the NATS
// users' passwords of a container run.
func (in *infra) secrets() []string {
	if in.cl == nil {
		return nil
	}
	var out []string
	for _, pw := range in.cl.passwords {
		out = append(out, pw)
	}
	return out
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
	if in.cl != nil {
		in.cl.close()
	}
}

// subscriptions is the NATS server's count of subscriptions per client
// connection name; an error while the server is down.
func (in *infra) subscriptions() (map[string]int, error) {
	in.mu.Lock()
	srv := in.nats
	in.mu.Unlock()
	if srv == nil {
		return nil, errors.New("the NATS server is down")
	}
	return srv.Subscriptions()
}
