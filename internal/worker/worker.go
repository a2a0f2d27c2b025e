// Package worker assembles a sluice worker from its configuration: NATS and
// the contract's streams, the state store, the upstream clients, the S3
// store, the poller, the runner and the consumer, plus the operations HTTP
// endpoints; with SLUICE_DEV=true it first starts the embedded default.
package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/buildinfo"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/console"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/devstack"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/gopool"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/reach"
	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/state"
)

// Endpoints tells where a running worker's parts listen; with SLUICE_DEV
// they are the embedded default's.
type Endpoints struct {
	NATSURL    string
	S3Endpoint string
	S3Bucket   string
	// S3Dir is where the embedded store keeps its objects as files ("" when
	// not in dev mode).
	S3Dir string
	// SimURL is the simulators' base URL ("" when not in dev mode).
	SimURL string
	// HTTPAddr is the address of /healthz, /readyz and /metrics.
	HTTPAddr string
}

// Run runs a worker until ctx is done, then stops it gracefully within
// cfg.ShutdownTimeout. ready, when non-nil, is called once the worker
// consumes (tests and the demo wait for it). A stop asked for while the
// worker is still starting (a SIGTERM while NATS is unreachable) is a clean
// stop too: Run returns nil, since nothing was held and nothing failed.
func Run(ctx context.Context, cfg config.Config, log zerolog.Logger, ready func(Endpoints)) error {
	err := run(ctx, cfg, log, ready)
	if err != nil && ctx.Err() != nil {
		log.Info().Str("while", err.Error()).Msg("worker stopped before it consumed")
		return nil
	}
	return err
}

func run(ctx context.Context, cfg config.Config, log zerolog.Logger, ready func(Endpoints)) error {
	var ep Endpoints
	s3Key, s3Secret := cfg.S3AccessKeyID, cfg.S3SecretAccessKey
	if cfg.Dev {
		stack, err := devstack.Start(ctx, devstack.Config{
			DataDir: cfg.DataDir, NATSPort: cfg.DevNATSPort, S3Addr: cfg.DevS3Addr, Bucket: cfg.S3Bucket,
			TaskTime: cfg.DevSimTaskTime, ComputeTime: cfg.DevSimComputeTime,
		})
		if err != nil {
			return fmt.Errorf("embedded default (SLUICE_DEV_NATS_PORT=%d, SLUICE_DEV_S3_ADDR=%s): %w", cfg.DevNATSPort, cfg.DevS3Addr, err)
		}
		defer stack.Close()
		cfg.NATSURL = stack.NATS.ClientURL()
		cfg.S3Endpoint, cfg.S3PathStyle, cfg.S3Bucket = stack.S3.Endpoint(), true, stack.Bucket
		cfg.S3Region = s3dev.Region
		s3Key, s3Secret = s3dev.AccessKeyID, s3dev.SecretAccessKey
		if cfg.MediaBaseURL == "" {
			cfg.MediaBaseURL, cfg.MediaAPIKey = stack.SimURL, devstack.MediaAPIKey
		}
		if cfg.ComputeBaseURL == "" {
			cfg.ComputeBaseURL, cfg.ComputeUser = stack.SimURL, devstack.ComputeUser
			cfg.ComputePassword, cfg.ComputeOrgID = devstack.ComputePassword, devstack.ComputeOrgID
			cfg.ComputeAccessKey, cfg.ComputeSecretKey = devstack.ComputeAccessKey, devstack.ComputeSecretKey
		}
		cfg.AllowPrivateURLs = true
		ep.S3Dir, ep.SimURL = filepath.Join(stack.S3.Dir(), "buckets"), stack.SimURL
		log.Info().Str("nats", cfg.NATSURL).Str("s3", cfg.S3Endpoint).Str("s3_bucket", cfg.S3Bucket).
			Str("s3_access_key_id", s3Key).Str("objects", filepath.Join(stack.S3.Dir(), "buckets")).
			Str("simulators", stack.SimURL).Msg("embedded default started")
	}
	log.Info().Interface("config", cfg.Summary()).Msg("starting worker")

	// The operations endpoints come first: /readyz says what the worker
	// waits for until it consumes.
	m := metrics.New()
	m.BuildInfo(buildinfo.Read())
	readyz := &readiness{}
	readyz.wait("connecting to NATS")
	var consoleSlot *lateHandler
	if cfg.Console {
		consoleSlot = &lateHandler{}
	}
	ops, err := serveOps(cfg.HTTPAddr, readyz, m, consoleSlot, log)
	if err != nil {
		return err
	}
	defer ops.Close()

	nc, err := connect(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	watch := reach.New(reach.Config{
		Conn: nc, MoveAfter: cfg.NATSMoveAfter, Logger: &log,
		Waiting: m.JetStreamWaiting, Failed: m.JetStreamFailed, Moved: m.NATSMoved,
	})
	defer watch.Stop()
	publishes := watch.Loop("event publishes")
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
		log.Debug().Err(err).Str("event", m.Header.Get(contract.HeaderMsgID)).Msg("progress event not published")
		publishes.Fail(err)
	}))
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	readyz.wait("waiting for JetStream")
	opts := contract.Options{Replicas: cfg.NATSReplicas, EventsMaxAge: cfg.EventsMaxAge, StateTTL: cfg.StateTTL, AckWait: cfg.AckWait}
	limits := quota.Limits{
		MediaTasks: cfg.FleetMediaTasks, MediaRate: cfg.FleetMediaRate,
		ComputeJobs: cfg.FleetComputeJobs, ComputeRate: cfg.FleetComputeRate,
		Containers: cfg.FleetContainers,
	}
	buckets, err := setUp(ctx, js, opts, limits.Any(), watch.Loop("setup"), readyz)
	if err != nil {
		return err
	}
	kv, specsKV := buckets.state, buckets.specs
	st := state.NewStore(kv, cfg.WorkerName, nil)
	st.Direct(nc)
	specs := state.NewSpecs(specsKV)
	specs.Direct(nc)
	fleet, err := fleetQuota(buckets.quota, nc, limits, cfg, m, log)
	if err != nil {
		return err
	}

	s3c, err := artifacts.NewS3Client(ctx, artifacts.S3Config{
		Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, PathStyle: cfg.S3PathStyle,
		AccessKeyID: s3Key, SecretAccessKey: s3Secret,
	})
	if err != nil {
		return err
	}
	store, err := artifacts.NewStore(artifacts.StoreConfig{
		Client: s3c, Bucket: cfg.S3Bucket, Prefix: cfg.S3Prefix, PartSize: cfg.PartSize,
		MaxUploads: cfg.CopyConcurrency, Logger: &log,
	})
	if err != nil {
		return err
	}
	stores := &storeWatch{probe: store.CheckBucket, where: storeWhere(cfg), log: log, m: m}
	if cfg.S3CreateBucket {
		stores.probe = store.EnsureBucket
	}
	// The first probe comes before the first pull: a worker whose store is
	// away takes no job.
	_ = stores.check(ctx)
	readyz.store = stores
	fetcher := artifacts.NewFetcher(artifacts.FetcherConfig{AllowPrivate: cfg.AllowPrivateURLs, MaxBytes: cfg.MaxArtifactBytes})

	// One pool of goroutines serves the consumer's handlers and the
	// runner's waiting jobs, so a job that detaches hands its grown stack
	// to the next.
	pool := gopool.New(0)
	rcfg := runner.Config{
		Pool: pool, State: st, Specs: specs, Events: events.NewPublisher(js).WithWorker(cfg.WorkerName), Store: store, Fetcher: fetcher, Cancels: runner.NewCancels(),
		MaxDeliver: cfg.MaxDeliver, MaxArtifactBytes: cfg.MaxArtifactBytes, TaskTimeout: cfg.TaskTimeout,
		QuotaRetry: cfg.MediaQuotaRetry, QuotaWait: cfg.MediaQuotaWait,
		ComputeTimeout: cfg.ComputeTimeout, ComputePoll: cfg.ComputePoll, PresignTTL: cfg.PresignTTL, StateTTL: cfg.StateTTL,
		CopyConcurrency: cfg.CopyConcurrency, Preflight: cfg.Preflight, PreflightConcurrency: cfg.PreflightConc,
		Metrics: m, Logger: &log, Reach: watch, Quota: fleet,
	}
	if cfg.MediaBaseURL != "" {
		rcfg.Media, err = apiclient.NewMedia(apiclient.MediaConfig{
			BaseURL: cfg.MediaBaseURL, APIKey: cfg.MediaAPIKey,
			HTTPClient: limitedClient(m, fleet, "media", cfg.MediaConcurrency, cfg.MediaRate),
		})
		if err != nil {
			return fmt.Errorf("SLUICE_MEDIA_BASE_URL: %w", err)
		}
		rcfg.Poller = runner.NewPoller(runner.PollerConfig{
			Client: rcfg.Media, MaxInterval: cfg.PollInterval, FirstDelay: cfg.PollFirst,
			Concurrency: max(cfg.MediaConcurrency/2, 1), Metrics: m, Logger: &log,
		})
	}
	if cfg.ComputeBaseURL != "" {
		rcfg.Compute, err = apiclient.NewCompute(apiclient.ComputeConfig{
			BaseURL: cfg.ComputeBaseURL, User: cfg.ComputeUser, Password: cfg.ComputePassword, OrgID: cfg.ComputeOrgID,
			AccessKey: cfg.ComputeAccessKey, SecretKey: cfg.ComputeSecretKey, AuthURL: cfg.ComputeAuthURL,
			Region: cfg.ComputeRegion, ChunkSize: int64(cfg.ComputeChunkSize), Logger: &log,
			HTTPClient: limitedClient(m, fleet, "compute", cfg.ComputeConc, cfg.ComputeRate),
		})
		if err != nil {
			return fmt.Errorf("SLUICE_COMPUTE_BASE_URL: %w", err)
		}
	}
	run, err := runner.New(rcfg)
	if err != nil {
		return err
	}
	if fleet != nil {
		stores.next = fleet
	}
	jobs, err := consumer.New(consumer.Config{
		Pool: pool, Gate: stores,
		JS: js, Kinds: cfg.Kinds, MaxInflight: cfg.MaxInflight, AckWait: cfg.AckWait,
		ShutdownTimeout: cfg.ShutdownTimeout, SweepInterval: cfg.SweepInterval, Logger: &log, Reach: watch,
		Observer: consumer.Observer{
			Held:     m.Held,
			Settled:  func(kind string, a consumer.Action) { m.Settled(kind, a.String()) },
			Waiting:  m.Waiting,
			Orphaned: m.Orphaned,
		},
	}, run)
	if err != nil {
		return err
	}

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	if rcfg.Poller != nil {
		go rcfg.Poller.Run(bg)
	}
	go stores.run(bg)
	quotaDone := make(chan struct{})
	go func() { fleet.Run(bg); close(quotaDone) }()
	if err := runner.ServeCancels(bg, nc, st, rcfg.Cancels, log); err != nil {
		return fmt.Errorf("subscribe %s: %w", contract.CancelSubject, err)
	}
	if cfg.Console {
		jc, err := jobclient.New(nc, nil)
		if err != nil {
			return err
		}
		// jc shares nc, which Run closes: jc is never closed on its own.
		cons, err := console.New(console.Config{Client: jc, Token: cfg.ConsoleToken, Presigner: store, Logger: &log})
		if err != nil {
			return err
		}
		consoleSlot.set(cons)
	}
	readyz.set(nc, js)

	log.Info().Strs("kinds", cfg.Kinds).Int("max_inflight", cfg.MaxInflight).Msg("worker consuming")
	if ready != nil {
		ep.NATSURL, ep.S3Endpoint, ep.S3Bucket, ep.HTTPAddr = cfg.NATSURL, cfg.S3Endpoint, cfg.S3Bucket, ops.Addr
		ready(ep)
	}
	err = jobs.Run(ctx)
	stopBG()
	// The quota's last write (the leases handed back) goes before the
	// connection drains.
	<-quotaDone
	if derr := nc.Drain(); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
		log.Debug().Err(derr).Msg("drain")
	}
	log.Info().Msg("worker stopped")
	return err
}

// connect dials NATS, retrying with backoff until ctx ends so that a
// worker may start before its broker.
func connect(ctx context.Context, cfg config.Config, log zerolog.Logger) (*nats.Conn, error) {
	sec := cfg.NATSSecurity()
	secure, err := sec.Options()
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name("sluice-worker " + cfg.WorkerName),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.Timeout(5 * time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn().Err(err).Msg("NATS disconnected")
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("server", nc.ConnectedUrlRedacted()).Msg("NATS reconnected")
		}),
		// Asynchronous errors, such as a permissions violation, are
		// otherwise silent.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Error().Err(err).Msg("NATS error")
		}),
	}
	opts = append(opts, secure...)
	spacing := backoff.Exponential{Min: 500 * time.Millisecond, Max: 10 * time.Second}
	for attempt := 0; ; attempt++ {
		nc, err := nats.Connect(cfg.NATSURL, opts...)
		if err == nil {
			return nc, nil
		}
		err = sec.Explain(err)
		delay := spacing.Ceiling(attempt)
		log.Warn().Err(err).Str("url", redact.ServerURLs(cfg.NATSURL)).Dur("retry_in", delay).Msg("cannot connect to NATS")
		if backoff.Sleep(ctx, delay) != nil {
			return nil, fmt.Errorf("connect to NATS: %w", err)
		}
	}
}

// buckets are the key-value buckets a worker uses.
type buckets struct {
	state, specs jetstream.KeyValue
	// quota is SLUICE_QUOTA, nil when no fleet limit is set.
	quota jetstream.KeyValue
}

// setUp creates or updates the contract's streams, consumers and buckets
// (SLUICE_QUOTA too when withQuota) and opens the buckets. While JetStream
// does not answer (no responders, a timeout, a 503, no peers: the cluster
// is unreachable or electing) it retries with backoff until ctx ends,
// /readyz saying why; another error is returned.
func setUp(ctx context.Context, js jetstream.JetStream, opts contract.Options, withQuota bool, loop *reach.Loop, ready *readiness) (b buckets, err error) {
	// An attempt whose request went unanswered ends after 5s, and the
	// pause between attempts is 5s at most, so a worker consumes within
	// about 10s of the cluster answering again. Objects an attempt created
	// stay, so a slow cluster needs no attempt to do everything in 5s.
	retry := backoff.Exponential{Min: 500 * time.Millisecond, Max: 5 * time.Second}
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = contract.Ensure(actx, js, opts)
		if err == nil {
			if b.state, err = js.KeyValue(actx, contract.StateBucket); err != nil {
				err = fmt.Errorf("bucket %s: %w", contract.StateBucket, err)
			}
		}
		if err == nil {
			if b.specs, err = js.KeyValue(actx, contract.SpecsBucket); err != nil {
				err = fmt.Errorf("bucket %s: %w", contract.SpecsBucket, err)
			}
		}
		if err == nil && withQuota {
			if b.quota, err = js.CreateOrUpdateKeyValue(actx, quota.BucketConfig(opts.Replicas)); err != nil {
				err = fmt.Errorf("bucket %s (SLUICE_FLEET_*): %w", quota.Bucket, err)
			}
		}
		cancel()
		if err == nil {
			loop.OK()
			return b, nil
		}
		if ctx.Err() != nil {
			return b, err
		}
		if reason, unreachable := reach.Reason(err); !unreachable && reason != "disconnected" {
			return b, err
		}
		loop.Fail(err)
		ready.wait("waiting for JetStream: " + err.Error())
		if backoff.Sleep(ctx, retry.Delay(attempt)) != nil {
			return b, err
		}
	}
}

// limitedClient is the HTTP client of api: at most conc requests at once
// and rate per second from this worker, and the fleet's rate for api's
// resource across every worker.
func limitedClient(m *metrics.Metrics, fleet *quota.Fleet, api string, conc int, rate float64) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = conc
	return &http.Client{Transport: m.Transport(api, apiclient.Route, fleet.Transport(api, apiclient.Limit(base, conc, rate)))}
}

// fleetQuota opens the fleet's quotas (SLUICE_FLEET_*) in kv, the
// SLUICE_QUOTA bucket setUp made, over nc; nil when no fleet limit is set.
func fleetQuota(kv jetstream.KeyValue, nc *nats.Conn, limits quota.Limits, cfg config.Config, m *metrics.Metrics, log zerolog.Logger) (*quota.Fleet, error) {
	if !limits.Any() {
		return nil, nil
	}
	m.QuotaRate(quota.Media, limits.MediaRate)
	m.QuotaRate(quota.Compute, limits.ComputeRate)
	fleet, err := quota.New(quota.Config{
		KV: kv, Conn: nc, Holder: cfg.WorkerName, Limits: limits, TTL: cfg.AckWait, Logger: &log,
		Observe: func(st quota.Status) { m.Quota(st.Resource, st.Limit, st.InUse, st.Held, st.Waiting, st.WaitingHere) },
	})
	if err != nil {
		return nil, err
	}
	log.Info().Int("media_tasks", limits.MediaTasks).Float64("media_rate", limits.MediaRate).
		Int("compute_jobs", limits.ComputeJobs).Float64("compute_rate", limits.ComputeRate).
		Int("containers", limits.Containers).Msg("fleet quotas on")
	return fleet, nil
}

// readiness is what /readyz reports: what the worker waits for until it
// consumes, then the state of NATS and the contract's streams.
type readiness struct {
	mu      sync.Mutex
	waiting string
	nc      *nats.Conn
	js      jetstream.JetStream
	// store, once set, says whether the artifact store answers.
	store *storeWatch
}

func (r *readiness) wait(what string) {
	r.mu.Lock()
	r.waiting = what
	r.mu.Unlock()
}

// set marks the worker as consuming through nc and js.
func (r *readiness) set(nc *nats.Conn, js jetstream.JetStream) {
	r.mu.Lock()
	r.waiting, r.nc, r.js = "", nc, js
	r.mu.Unlock()
}

// check returns why the worker is not ready, or nil.
func (r *readiness) check(ctx context.Context) error {
	r.mu.Lock()
	waiting, nc, js, store := r.waiting, r.nc, r.js, r.store
	r.mu.Unlock()
	switch {
	case waiting != "" || nc == nil:
		return errors.New(cmp.Or(waiting, "starting"))
	case !nc.IsConnected():
		return errors.New("NATS not connected")
	}
	if store != nil {
		if err := store.Err(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return contract.Present(ctx, js)
}

// storeWhere names the artifact store of cfg for messages: its endpoint
// without credentials (or AWS S3's region), and the bucket.
func storeWhere(cfg config.Config) string {
	endpoint := "AWS S3 in " + cfg.S3Region
	if cfg.S3Endpoint != "" {
		endpoint = redact.URL(cfg.S3Endpoint)
	}
	return fmt.Sprintf("%s, bucket %s", endpoint, cfg.S3Bucket)
}

// lateHandler serves a handler set once the worker has reached NATS (the
// console needs it), and 503 until then; the ops server starts first.
type lateHandler struct{ h atomic.Pointer[http.Handler] }

func (l *lateHandler) set(h http.Handler) { l.h.Store(&h) }

func (l *lateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := l.h.Load()
	if h == nil {
		http.Error(w, "the console starts once the worker reaches NATS", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}

// serveOps serves /healthz, /readyz, /metrics and, when cons is not nil,
// the web console under /console/ on addr.
func serveOps(addr string, ready *readiness, m *metrics.Metrics, cons *lateHandler, log zerolog.Logger) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready.check(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", m.Handler())
	paths := "/healthz /readyz /metrics"
	if cons != nil {
		mux.Handle(console.Prefix, cons)
		mux.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusFound))
		paths += " /console/"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("SLUICE_HTTP_ADDR %s: %w", addr, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("ops server")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving " + paths)
	return srv, nil
}
