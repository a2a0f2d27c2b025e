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
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/reach"
	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/tenants"
	"github.com/sluice-dev/sluice/internal/tracing"
	"github.com/sluice-dev/sluice/internal/watchdog"
	"github.com/sluice-dev/sluice/internal/webhooks"
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
	// APIAddr is the HTTP API's address ("" when SLUICE_API_ADDR is
	// unset).
	APIAddr string
	// HTTPAddr is the address of /healthz, /readyz and /metrics.
	HTTPAddr string
}

// Run runs a worker until ctx is done, then stops it gracefully within
// cfg.ShutdownTimeout. ready, when non-nil, is called once the worker
// consumes (tests and the demo wait for it). A stop asked for while the
// worker is still starting (a SIGTERM while NATS is unreachable) is a clean
// stop too: Run returns nil, since no job was taken and nothing failed.
func Run(ctx context.Context, cfg config.Config, log zerolog.Logger, ready func(Endpoints)) error {
	// The embedded default points every upstream left unset at its
	// simulators; otherwise a served kind needs its upstream's address.
	if !cfg.Dev {
		if err := cfg.CheckUpstreams(); err != nil {
			return err
		}
	}
	cat, err := cfg.ModelCatalog()
	if err != nil {
		return fmt.Errorf("SLUICE_MEDIA_MODELS: %w", err)
	}
	err = run(ctx, cfg, cat, log, ready)
	if err != nil && ctx.Err() != nil {
		log.Info().Str("while", err.Error()).Msg("worker stopped before it consumed")
		return nil
	}
	return err
}

func run(ctx context.Context, cfg config.Config, cat *models.Catalog, log zerolog.Logger, ready func(Endpoints)) error {
	var ep Endpoints
	if cfg.Dev {
		stack, err := startDev(ctx, &cfg, log)
		if err != nil {
			return err
		}
		defer stack.Close()
		ep.S3Dir, ep.SimURL = filepath.Join(stack.S3.Dir(), "buckets"), stack.SimURL
	}
	logStart(cfg, log)

	// The operations endpoints come first: /readyz says what the worker
	// waits for until it consumes.
	m := metrics.New()
	m.BuildInfo(buildinfo.Read())
	m.Zero(knownSeries(cfg.Kinds))
	readyz := &readiness{}
	readyz.wait("connecting to NATS")
	ops, consoleSlot, err := serveOps(cfg.HTTPAddr, cfg.Console, readyz, m, log)
	if err != nil {
		return err
	}
	defer ops.Close()
	tr, stopTraces, err := startTracing(ctx, cfg, m, log)
	if err != nil {
		return err
	}
	defer stopTraces()

	nc, err := connect(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	watch, space := watchJetStream(cfg, nc, m, log)
	defer watch.Stop()
	js, err := openJetStream(nc, watch, log)
	if err != nil {
		return err
	}
	space.js = js
	readyz.wait("waiting for JetStream")
	p, err := openParts(ctx, cfg, cat, nc, js, watch, readyz, m, tr, log)
	if err != nil {
		return err
	}
	space.next, p.space = p.stores, space
	readyz.watchSpace(space)
	jobs, err := consumer.New(consumerConfig(cfg, p, js, watch, m, tr, log), p.runner)
	if err != nil {
		return err
	}

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	go space.run(bg)
	quotaDone, err := serveBackground(bg, p, nc, log)
	if err != nil {
		return err
	}
	apiAddr, stopAPI, err := startSurfaces(ctx, cfg, cat, consoleSlot, nc, p.store, m, log)
	if err != nil {
		return err
	}
	defer stopAPI()
	readyz.set(nc, js)

	log.Info().Strs("kinds", cfg.Kinds).Int("max_inflight", cfg.MaxInflight).Msg("worker consuming")
	if ready != nil {
		ep.NATSURL, ep.S3Endpoint, ep.S3Bucket, ep.HTTPAddr, ep.APIAddr = cfg.NATSURL, cfg.S3Endpoint, cfg.S3Bucket, ops.Addr, apiAddr
		ready(ep)
	}
	err = jobs.Run(ctx)
	stopBG()
	drain(nc, quotaDone, log)
	log.Info().Msg("worker stopped")
	return err
}

// logStart logs the configuration the worker starts with, and warns of a
// test build's clock offset.
func logStart(cfg config.Config, log zerolog.Logger) {
	log.Info().Interface("config", cfg.Summary()).Msg("starting worker")
	if cfg.FaultClockOffset != 0 {
		log.Warn().Dur("offset", cfg.FaultClockOffset).Msg("test build: every wall-clock reading is moved by SLUICE_FAULT_CLOCK_OFFSET")
	}
}

// startTracing starts the trace exporter the OTEL_* variables ask for (a
// no-op one when none) and returns the function that flushes it at stop.
func startTracing(ctx context.Context, cfg config.Config, m *metrics.Metrics, log zerolog.Logger) (*tracing.Tracing, func(), error) {
	tr, err := tracing.Start(ctx, cfg.Tracing, tracing.ServiceWorker, m.SpansDropped)
	if err != nil {
		return nil, nil, err
	}
	return tr, func() {
		if err := tr.Shutdown(ctx); err != nil {
			log.Debug().Err(err).Msg("traces not all exported at stop")
		}
	}, nil
}

// watchJetStream returns the watch of the worker's loops that reach
// JetStream, and the space watch it tells of writes refused for lack of
// space.
func watchJetStream(cfg config.Config, nc *nats.Conn, m *metrics.Metrics, log zerolog.Logger) (*reach.Watch, *spaceWatch) {
	space := newSpaceWatch(log, m)
	watch := reach.New(reach.Config{
		Conn: nc, MoveAfter: cfg.NATSMoveAfter, Logger: &log,
		Waiting: m.JetStreamWaiting, Failed: m.JetStreamFailed, Moved: m.NATSMoved, NoSpace: space.refused,
	})
	return watch, space
}

// drain drains nc once the fleet's quotas have made their last write
// (their slots handed back), which must go out before the connection
// closes.
func drain(nc *nats.Conn, quotaDone <-chan struct{}, log zerolog.Logger) {
	<-quotaDone
	if err := nc.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		log.Debug().Err(err).Msg("drain")
	}
}

// startDev starts the embedded default (SLUICE_DEV) and points cfg at it:
// its NATS, its S3 store with its credentials, and its simulators for the
// upstreams cfg does not name.
func startDev(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*devstack.Stack, error) {
	stack, err := devstack.Start(ctx, devstack.Config{
		DataDir: cfg.DataDir, NATSPort: cfg.DevNATSPort, S3Addr: cfg.DevS3Addr, Bucket: cfg.S3Bucket,
		TaskTime: cfg.DevSimTaskTime, ComputeTime: cfg.DevSimComputeTime,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded default (SLUICE_DEV_NATS_PORT=%d, SLUICE_DEV_S3_ADDR=%s): %w", cfg.DevNATSPort, cfg.DevS3Addr, err)
	}
	cfg.NATSURL = stack.NATS.ClientURL()
	cfg.S3Endpoint, cfg.S3PathStyle, cfg.S3Bucket = stack.S3.Endpoint(), true, stack.Bucket
	cfg.S3Region = s3dev.Region
	cfg.S3AccessKeyID, cfg.S3SecretAccessKey = s3dev.AccessKeyID, s3dev.SecretAccessKey
	if cfg.MediaBaseURL == "" {
		cfg.MediaBaseURL, cfg.MediaAPIKey = stack.SimURL, devstack.MediaAPIKey
	}
	if cfg.ComputeBaseURL == "" {
		cfg.ComputeBaseURL, cfg.ComputeUser = stack.SimURL, devstack.ComputeUser
		cfg.ComputePassword, cfg.ComputeOrgID = devstack.ComputePassword, devstack.ComputeOrgID
		cfg.ComputeAccessKey, cfg.ComputeSecretKey = devstack.ComputeAccessKey, devstack.ComputeSecretKey
	}
	cfg.AllowPrivateURLs = true
	log.Info().Str("nats", cfg.NATSURL).Str("s3", cfg.S3Endpoint).Str("s3_bucket", cfg.S3Bucket).
		Str("s3_access_key_id", cfg.S3AccessKeyID).Str("objects", filepath.Join(stack.S3.Dir(), "buckets")).
		Str("simulators", stack.SimURL).Msg("embedded default started")
	return stack, nil
}

// openJetStream opens JetStream over nc. A progress event whose
// asynchronous publish fails is reported to watch's "event publishes"
// loop: the runner does not wait for those.
func openJetStream(nc *nats.Conn, watch *reach.Watch, log zerolog.Logger) (jetstream.JetStream, error) {
	publishes := watch.Loop("event publishes")
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
		log.Debug().Err(err).Str("event", m.Header.Get(contract.HeaderMsgID)).Msg("progress event not published")
		publishes.Fail(err)
	}))
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return js, nil
}

// parts are what a worker serves jobs with, once NATS answers.
type parts struct {
	state  *state.Store
	store  *artifacts.Store
	stores *storeWatch
	space  *spaceWatch
	fleet  *quota.Fleet
	// tenants is the ledger over the live view of SLUICE_TENANTS, whose
	// View is the scheduler's Policy.
	tenants *tenants.Ledger
	clock   *natsconn.Clock
	pool    *gopool.Pool
	rcfg    runner.Config
	runner  *runner.Runner
	// hooks is the webhooks' store, specs SLUICE_SPECS (for the jobs'
	// own notify.webhook).
	hooks *webhooks.Store
	specs jetstream.KeyValue
	// webhooks runs the webhook dispatcher and sender (nil: off).
	webhooks func(context.Context) error
}

// openParts sets up the contract's streams and buckets and opens what a
// job goes through: the state store, the fleet's quotas, the artifact
// store (probed once before the first pull: a worker whose store is away
// takes no job), the upstream clients and the runner.
func openParts(ctx context.Context, cfg config.Config, cat *models.Catalog, nc *nats.Conn, js jetstream.JetStream, watch *reach.Watch,
	readyz *readiness, m *metrics.Metrics, tr *tracing.Tracing, log zerolog.Logger) (p parts, err error) {
	opts := contract.Options{Replicas: cfg.NATSReplicas, EventsMaxAge: cfg.EventsMaxAge, StateTTL: cfg.StateTTL, AckWait: cfg.AckWait}
	limits := fleetLimits(cfg)
	b, err := setUp(ctx, js, opts, limits.Any(), watch.Loop("setup"), readyz)
	if err != nil {
		return p, err
	}
	// The times the worker stores for the others (records, events) and
	// compares with theirs are the NATS server's, followed on cfg.Clock's
	// elapsed time (its one wall clock), so the workers' clocks need not
	// agree; Run keeps it in step (serveBackground).
	p.clock = natsconn.NewClock(b.state, cfg.Clock(), log)
	if err := p.clock.Sync(ctx); err != nil {
		log.Warn().Err(err).Msg("cannot read the NATS server's time yet; this worker's own clock stands in until it can")
	}
	clock := p.clock.Now
	p.state = state.NewStore(b.state, cfg.WorkerName, clock)
	p.state.Direct(nc)
	p.hooks, p.specs = b.webhooks, b.specs
	specs := state.NewSpecs(b.specs)
	specs.Direct(nc)
	if p.fleet, err = fleetQuota(b.quota, nc, limits, cfg, m, log); err != nil {
		return p, err
	}
	view, err := tenants.Watch(ctx, b.tenants, clock, log)
	if err != nil {
		return p, err
	}
	p.tenants = tenants.NewLedger(b.tenants, nc, view, clock)
	m.WatchTenants(view.MetricsSpend)
	publishCatalog(ctx, b.tenants, cfg, cat, clock, log)
	if p.store, p.stores, err = openStore(ctx, cfg, m, tr, log); err != nil {
		return p, err
	}
	readyz.store = p.stores
	// One pool of goroutines serves the consumer's handlers and the
	// runner's waiting jobs, so a job that detaches hands its grown stack
	// to the next.
	p.pool = gopool.New(0)
	p.rcfg = runner.Config{
		Pool: p.pool, State: p.state, Specs: specs,
		Events: events.NewPublisher(js).WithWorker(cfg.WorkerName).WithTracing(tr.Provider, tr.Propagator),
		Store:  p.store, Cancels: runner.NewCancels(), JS: js, WebhookPolicy: webhooks.PolicyOf(cfg.AllowPrivateURLs, cfg.Dev),
		Fetcher:    artifacts.NewFetcher(artifacts.FetcherConfig{AllowPrivate: cfg.AllowPrivateURLs, MaxBytes: cfg.MaxArtifactBytes}),
		MaxDeliver: cfg.MaxDeliver, MaxArtifactBytes: cfg.MaxArtifactBytes, TaskTimeout: cfg.TaskTimeout,
		QuotaRetry: cfg.MediaQuotaRetry, QuotaWait: cfg.MediaQuotaWait, StoreRefusalLimit: cfg.StoreRefusalLimit,
		ComputeTimeout: cfg.ComputeTimeout, ComputePoll: cfg.ComputePoll, PresignTTL: cfg.PresignTTL, StateTTL: cfg.StateTTL,
		CopyConcurrency: cfg.CopyConcurrency, Preflight: cfg.Preflight, PreflightConcurrency: cfg.PreflightConc,
		Tracer: tr.Provider, Metrics: m, Logger: &log, Reach: watch, Quota: p.fleet, Now: clock,
		Tenants: p.tenants, Models: cat,
		StepMinDeadline: cfg.StuckMinDeadline,
		Watchdog: watchdog.New(watchdog.Config{
			Factor: cfg.StuckFactor, HandBackFactor: cfg.StuckHandBack, Interval: cfg.AckWait / 4,
			Now: clock, Log: log, Counted: m.Stuck, Mark: runner.MarkStuck(p.state, cfg.WorkerName, clock),
		}),
	}
	if err := openUpstreams(&p.rcfg, cfg, m, p.fleet, tr, log); err != nil {
		return p, err
	}
	if p.runner, err = runner.New(p.rcfg); err != nil {
		return p, err
	}
	p.webhooks = webhookRun(cfg, js, p, m, log)
	if p.fleet != nil {
		p.stores.next = p.fleet
	}
	return p, nil
}

// openStore opens the artifact store of cfg and its watch, and probes it
// once.
func openStore(ctx context.Context, cfg config.Config, m *metrics.Metrics, tr *tracing.Tracing, log zerolog.Logger) (*artifacts.Store, *storeWatch, error) {
	s3c, err := artifacts.NewS3Client(ctx, artifacts.S3Config{
		Endpoint: cfg.S3Endpoint, Region: cfg.S3Region, PathStyle: cfg.S3PathStyle,
		AccessKeyID: cfg.S3AccessKeyID, SecretAccessKey: cfg.S3SecretAccessKey,
		WrapTransport: func(base http.RoundTripper) http.RoundTripper {
			return tracing.Transport(tr.Provider, tr.Propagator, base)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	store, err := artifacts.NewStore(artifacts.StoreConfig{
		Client: s3c, Bucket: cfg.S3Bucket, Prefix: cfg.S3Prefix, PartSize: cfg.PartSize,
		MaxUploads: cfg.CopyConcurrency, Logger: &log,
	})
	if err != nil {
		return nil, nil, err
	}
	stores := &storeWatch{probe: store.CheckBucket, where: storeWhere(cfg), log: log, m: m}
	if cfg.S3CreateBucket {
		stores.probe = store.EnsureBucket
	}
	_ = stores.check(ctx)
	return store, stores, nil
}

// openUpstreams adds to rcfg the clients of the upstreams cfg names (and
// the media poller), each behind its limits.
func openUpstreams(rcfg *runner.Config, cfg config.Config, m *metrics.Metrics, fleet *quota.Fleet, tr *tracing.Tracing, log zerolog.Logger) (err error) {
	if cfg.MediaBaseURL != "" {
		rcfg.Media, err = apiclient.NewMedia(apiclient.MediaConfig{
			BaseURL: cfg.MediaBaseURL, APIKey: cfg.MediaAPIKey,
			HTTPClient: limitedClient(m, fleet, tr, "media", cfg.MediaConcurrency, cfg.MediaRate),
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
			OnToken: m.ComputeToken,
			// Only the embedded default points at the simulator with its user.
			Simulated:  cfg.Dev && cfg.ComputeUser == devstack.ComputeUser,
			HTTPClient: limitedClient(m, fleet, tr, "compute", cfg.ComputeConc, cfg.ComputeRate),
		})
		if err != nil {
			return fmt.Errorf("SLUICE_COMPUTE_BASE_URL: %w", err)
		}
	}
	return nil
}

// consumerConfig is the consumer of cfg's kinds: it pulls only the jobs
// the space watch (and behind it the store watch and the fleet's quotas)
// lets start.
func consumerConfig(cfg config.Config, p parts, js jetstream.JetStream, watch *reach.Watch, m *metrics.Metrics, tr *tracing.Tracing, log zerolog.Logger) consumer.Config {
	return consumer.Config{
		Tracer: tr.Provider, Propagator: tr.Propagator,
		Pool: p.pool, Gate: p.space, GateChanged: p.fleet.Changed,
		JS: js, Kinds: cfg.Kinds, MaxInflight: cfg.MaxInflight, AckWait: cfg.AckWait,
		ShutdownTimeout: cfg.ShutdownTimeout, SweepInterval: cfg.SweepInterval, Logger: &log, Reach: watch,
		Observer: consumer.Observer{
			Held:         m.Held,
			Settled:      func(kind string, a consumer.Action) { m.Settled(kind, a.String()) },
			Waiting:      m.Waiting,
			Orphaned:     m.Orphaned,
			WaitingClass: m.WaitingClass,
		},
		PriorityAging: cfg.PriorityAging, Policy: orderPolicy(cfg, p),
	}
}

// orderPolicy is what orders the starts: the live view of SLUICE_TENANTS,
// unless a test set a policy of its own.
func orderPolicy(cfg config.Config, p parts) order.Policy {
	if cfg.Order != nil || p.tenants == nil {
		return cfg.Order
	}
	return p.tenants.View()
}

// serveBackground starts what runs beside the consumer until bg ends: the
// media poller, the store's probes, the fleet's quotas (quotaDone closes
// once their last write is made) and the cancel requests' subscription.
func serveBackground(bg context.Context, p parts, nc *nats.Conn, log zerolog.Logger) (quotaDone <-chan struct{}, err error) {
	if p.rcfg.Poller != nil {
		go p.rcfg.Poller.Run(bg)
	}
	go p.stores.run(bg)
	go p.clock.Run(bg)
	go p.rcfg.Watchdog.Run(bg)
	done := make(chan struct{})
	go func() { p.fleet.Run(bg); close(done) }()
	if err := runner.ServeCancels(bg, nc, p.state, p.rcfg.Cancels, log); err != nil {
		return done, fmt.Errorf("subscribe %s: %w", contract.CancelSubject, err)
	}
	if p.webhooks != nil {
		return done, p.webhooks(bg)
	}
	return done, nil
}

// startConsole puts the web console into slot, which the ops server has
// answered 503 until now. Its job client shares nc, which Run closes: it
// is never closed on its own.
func startConsole(slot *lateHandler, nc *nats.Conn, store *artifacts.Store, token string, log zerolog.Logger) error {
	jc, err := jobclient.New(nc, nil)
	if err != nil {
		return err
	}
	cons, err := console.New(console.Config{Client: jc, Token: token, Presigner: store, Logger: &log})
	if err != nil {
		return err
	}
	slot.set(cons)
	return nil
}

// disconnected warns of a lost connection. The client calls it with no
// error, and none recorded, when the worker closes the connection itself
// on a clean stop: that is no news.
func disconnected(log zerolog.Logger) nats.ConnErrHandler {
	return func(nc *nats.Conn, err error) {
		if err == nil {
			err = nc.LastError()
		}
		if err != nil {
			log.Warn().Err(err).Msg("NATS disconnected")
		}
	}
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
		nats.DisconnectErrHandler(disconnected(log)),
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
	var nc *nats.Conn
	err = backoff.Retry{Spacing: spacing, Jitter: backoff.JitterNone}.Do(ctx, func(_ context.Context, attempt int) error {
		var err error
		if nc, err = nats.Connect(cfg.NATSURL, opts...); err != nil {
			err = sec.Explain(err)
			log.Warn().Err(err).Str("url", redact.ServerURLs(cfg.NATSURL)).Dur("retry_in", spacing.Ceiling(attempt)).Msg("cannot connect to NATS")
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return nc, nil
}

// buckets are the key-value buckets a worker uses.
type buckets struct {
	state, specs jetstream.KeyValue
	// quota is SLUICE_QUOTA, nil when no fleet limit is set.
	quota jetstream.KeyValue
	// tenants is SLUICE_TENANTS.
	tenants jetstream.KeyValue
	// webhooks is SLUICE_WEBHOOKS and SLUICE_WEBHOOK_RECORDS.
	webhooks *webhooks.Store
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
	retry := backoff.Retry{Spacing: backoff.Exponential{Min: 500 * time.Millisecond, Max: 5 * time.Second}}
	err = retry.Do(ctx, func(ctx context.Context, _ int) error {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		if b, err = openBuckets(actx, js, opts, withQuota); err == nil {
			loop.OK()
			return nil
		}
		if ctx.Err() != nil {
			return backoff.Permanent(err)
		}
		if reason, unreachable := reach.Reason(err); !unreachable && reason != "disconnected" {
			return backoff.Permanent(err)
		}
		loop.Fail(err)
		ready.wait("waiting for JetStream: " + err.Error())
		return err
	})
	return b, err
}

// openBuckets is one attempt of setUp.
func openBuckets(ctx context.Context, js jetstream.JetStream, opts contract.Options, withQuota bool) (b buckets, err error) {
	if err := contract.Ensure(ctx, js, opts); err != nil {
		return b, err
	}
	if b.state, err = js.KeyValue(ctx, contract.StateBucket); err != nil {
		return b, fmt.Errorf("bucket %s: %w", contract.StateBucket, err)
	}
	if b.specs, err = js.KeyValue(ctx, contract.SpecsBucket); err != nil {
		return b, fmt.Errorf("bucket %s: %w", contract.SpecsBucket, err)
	}
	if b.tenants, err = js.KeyValue(ctx, contract.TenantsBucket); err != nil {
		return b, fmt.Errorf("bucket %s: %w", contract.TenantsBucket, err)
	}
	if b.webhooks, err = webhooks.Ensure(ctx, js, webhooks.Options{Replicas: opts.Replicas, RecordsTTL: opts.EventsMaxAge}); err != nil {
		return b, err
	}
	if withQuota {
		if b.quota, err = js.CreateOrUpdateKeyValue(ctx, quota.BucketConfig(opts.Replicas)); err != nil {
			return b, fmt.Errorf("bucket %s (SLUICE_FLEET_*): %w", quota.Bucket, err)
		}
	}
	return b, nil
}

// fleetLimits are the fleet's quotas of cfg (SLUICE_FLEET_*).
func fleetLimits(cfg config.Config) quota.Limits {
	return quota.Limits{
		MediaTasks: cfg.FleetMediaTasks, MediaRate: cfg.FleetMediaRate,
		ComputeJobs: cfg.FleetComputeJobs, ComputeRate: cfg.FleetComputeRate,
		Containers: cfg.FleetContainers,
	}
}

// limitedClient is the HTTP client of api: at most conc requests at once
// and rate per second from this worker, and the fleet's rate for api's
// resource across every worker. A request inside a traced job gets a
// client span (outermost, so it covers the wait for the limits too).
func limitedClient(m *metrics.Metrics, fleet *quota.Fleet, tr *tracing.Tracing, api string, conc int, rate float64) *http.Client {
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.MaxIdleConnsPerHost = conc
	limited := m.Transport(api, apiclient.Route, fleet.Transport(api, apiclient.Limit(base, conc, rate)))
	return &http.Client{Transport: tracing.Transport(tr.Provider, tr.Propagator, limited)}
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
		KV: kv, Conn: nc, Holder: cfg.WorkerName, Limits: limits, TTL: cfg.AckWait, Logger: &log, Now: cfg.Clock(),
		Observe: func(st quota.Status) {
			m.Quota(st.Resource, st.Limit, st.Effective, st.InUse, st.Held, st.Waiting, st.WaitingHere)
		},
		Count: m.QuotaBoardOp,
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
	// store, once set, says whether the artifact store answers; space,
	// whether JetStream has space for the worker's writes.
	store *storeWatch
	space *spaceWatch
}

func (r *readiness) wait(what string) {
	r.mu.Lock()
	r.waiting = what
	r.mu.Unlock()
}

// watchSpace makes /readyz say when JetStream has no space.
func (r *readiness) watchSpace(space *spaceWatch) {
	r.mu.Lock()
	r.space = space
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
	waiting, nc, js, store, space := r.waiting, r.nc, r.js, r.store, r.space
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
	if space != nil {
		if err := space.Err(); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return contract.Present(ctx, js)
}

// storeWhere names the artifact store of cfg for messages by the
// variables that set it, so the line says what to fix: its endpoint
// without credentials (or AWS S3's region), and the bucket.
func storeWhere(cfg config.Config) string {
	endpoint := "AWS S3 in SLUICE_S3_REGION=" + cfg.S3Region
	if cfg.S3Endpoint != "" {
		endpoint = "SLUICE_S3_ENDPOINT=" + redact.URL(cfg.S3Endpoint)
	}
	return fmt.Sprintf("%s, SLUICE_S3_BUCKET=%s", endpoint, cfg.S3Bucket)
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

// serveOps serves /healthz, /readyz, /metrics and, withConsole, the web
// console under /console/ on addr: the console's slot answers 503 until
// it is set.
func serveOps(addr string, withConsole bool, ready *readiness, m *metrics.Metrics, log zerolog.Logger) (*http.Server, *lateHandler, error) {
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
	var cons *lateHandler
	if withConsole {
		cons = &lateHandler{}
		mux.Handle(console.Prefix, cons)
		mux.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusFound))
		paths += " /console/"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("SLUICE_HTTP_ADDR %s: %w", addr, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("ops server")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving " + paths)
	return srv, cons, nil
}

// knownSeries are the label values the worker's metrics export at 0 from
// its start: the kinds it serves, every terminal status and every way a
// message is settled.
func knownSeries(kinds []string) metrics.Known {
	k := metrics.Known{Kinds: kinds}
	for _, s := range []state.Status{state.StatusSucceeded, state.StatusFailed, state.StatusCancelled} {
		k.Statuses = append(k.Statuses, string(s))
	}
	for _, a := range []consumer.Action{consumer.Ack, consumer.Retry, consumer.Release, consumer.DeadLetter} {
		k.Actions = append(k.Actions, a.String())
	}
	return k
}
