// Package config reads the worker's configuration from the environment
// (docs/configuration.md) in one place and validates it, naming the
// variable of every invalid value.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/config/containername"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/tracing"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// Prefix is the prefix of every variable.
const Prefix = "SLUICE"

// Config is the worker's configuration. The first block is the contract's;
// the second holds sluice's own extensions, each with a default that suits
// most deployments. Secrets (MediaAPIKey, ComputePassword,
// ComputeSecretKey) must never be logged: use Summary for logging.
//
// Each default is stated once: in its field's `default:` tag, or, for a
// field whose component applies the same default to a config made in code
// (the consumer's, the runner's, the contract's JetStream objects'), in
// that component's exported constant, which Parse applies when the
// variable is not set (componentDefaults). Usage and Validate see both
// alike.
type Config struct {
	Dev              bool          `envconfig:"DEV" default:"false"`
	DataDir          string        `envconfig:"DATA_DIR" default:"./data"`
	NATSURL          string        `envconfig:"NATS_URL" default:"nats://127.0.0.1:4222"`
	NATSCreds        string        `envconfig:"NATS_CREDS"`
	NATSTLSCA        string        `envconfig:"NATS_TLS_CA"`
	NATSTLSCert      string        `envconfig:"NATS_TLS_CERT"`
	NATSTLSKey       string        `envconfig:"NATS_TLS_KEY"`
	Kinds            []string      `envconfig:"KINDS" default:"video,speech,compute,container,pipeline"`
	S3Endpoint       string        `envconfig:"S3_ENDPOINT"`
	S3Region         string        `envconfig:"S3_REGION" default:"us-east-1"`
	S3Bucket         string        `envconfig:"S3_BUCKET"`
	S3Prefix         string        `envconfig:"S3_PREFIX" default:"sluice"`
	S3PathStyle      bool          `envconfig:"S3_PATH_STYLE" default:"false"`
	MediaBaseURL     string        `envconfig:"MEDIA_BASE_URL"`
	MediaAPIKey      string        `envconfig:"MEDIA_API_KEY"`
	MediaModels      string        `envconfig:"MEDIA_MODELS"`
	ComputeBaseURL   string        `envconfig:"COMPUTE_BASE_URL"`
	ComputeUser      string        `envconfig:"COMPUTE_USER"`
	ComputePassword  string        `envconfig:"COMPUTE_PASSWORD"`
	ComputeOrgID     string        `envconfig:"COMPUTE_ORGID"`
	ComputeAccessKey string        `envconfig:"COMPUTE_ACCESS_KEY"`
	ComputeSecretKey string        `envconfig:"COMPUTE_SECRET_KEY"`
	ComputeAuthURL   string        `envconfig:"COMPUTE_AUTH_URL"`
	ComputeRegion    string        `envconfig:"COMPUTE_REGION"`
	ComputeChunkSize ByteSize      `envconfig:"COMPUTE_CHUNK_SIZE" default:"8MiB"`
	MaxInflight      int           `envconfig:"MAX_INFLIGHT"`
	PollInterval     time.Duration `envconfig:"POLL_INTERVAL" default:"5s"`
	PollFirst        time.Duration `envconfig:"POLL_FIRST" default:"1s"`
	ComputePoll      time.Duration `envconfig:"COMPUTE_POLL_INTERVAL"`
	AllowPrivateURLs bool          `envconfig:"ALLOW_PRIVATE_URLS" default:"false"`
	MaxArtifactBytes int64         `envconfig:"MAX_ARTIFACT_BYTES"`
	HTTPAddr         string        `envconfig:"HTTP_ADDR" default:":9090"`
	LogLevel         string        `envconfig:"LOG_LEVEL" default:"info"`
	LogFormat        string        `envconfig:"LOG_FORMAT" default:"json"`
	ShutdownTimeout  time.Duration `envconfig:"SHUTDOWN_TIMEOUT"`
	Preflight        string        `envconfig:"PREFLIGHT"`
	FleetMediaTasks  int           `envconfig:"FLEET_MEDIA_TASKS" default:"0"`
	FleetMediaRate   float64       `envconfig:"FLEET_MEDIA_RATE" default:"0"`
	FleetComputeJobs int           `envconfig:"FLEET_COMPUTE_JOBS" default:"0"`
	FleetComputeRate float64       `envconfig:"FLEET_COMPUTE_RATE" default:"0"`
	FleetContainers  int           `envconfig:"FLEET_CONTAINERS" default:"0"`
	Console          bool          `envconfig:"CONSOLE" default:"true"`
	// ConsoleToken is a secret: never logged (Summary says only whether
	// it is set).
	ConsoleToken string `envconfig:"CONSOLE_TOKEN"`
	// APIAddr is the HTTP API's listen address; empty: no API.
	APIAddr string `envconfig:"API_ADDR"`

	// Extensions.
	WorkerName        string        `envconfig:"WORKER_NAME"`
	AckWait           time.Duration `envconfig:"ACK_WAIT"`
	MaxDeliver        int           `envconfig:"MAX_DELIVER"`
	TaskTimeout       time.Duration `envconfig:"TASK_TIMEOUT"`
	MediaQuotaRetry   time.Duration `envconfig:"MEDIA_QUOTA_RETRY"`
	MediaQuotaWait    time.Duration `envconfig:"MEDIA_QUOTA_WAIT"`
	StoreRefusalLimit time.Duration `envconfig:"STORE_REFUSAL_LIMIT"`
	ComputeTimeout    time.Duration `envconfig:"COMPUTE_TIMEOUT"`
	// StuckFactor times a step's deadline is the step's bound, past which
	// the watchdog reports a job stuck; StuckHandBack times it is the hard
	// bound, past which its delivery is handed back (internal/watchdog).
	StuckFactor   float64 `envconfig:"STUCK_FACTOR" default:"3"`
	StuckHandBack float64 `envconfig:"STUCK_HANDBACK_FACTOR" default:"10"`
	// StuckMinDeadline is the least deadline of a step before the paid
	// submit (SLUICE_ACK_WAIT when longer): such a step waits on queues
	// (local concurrency, rate limits) and on NATS writes of up to 35s.
	StuckMinDeadline  time.Duration `envconfig:"STUCK_MIN_DEADLINE" default:"1m"`
	MediaConcurrency  int           `envconfig:"MEDIA_MAX_CONCURRENCY" default:"16"`
	MediaRate         float64       `envconfig:"MEDIA_RATE_LIMIT" default:"50"`
	ComputeConc       int           `envconfig:"COMPUTE_MAX_CONCURRENCY" default:"8"`
	ComputeRate       float64       `envconfig:"COMPUTE_RATE_LIMIT" default:"20"`
	CopyConcurrency   int           `envconfig:"COPY_CONCURRENCY"`
	PreflightConc     int           `envconfig:"PREFLIGHT_CONCURRENCY"`
	PartSize          int64         `envconfig:"S3_PART_SIZE" default:"8388608"`
	NATSReplicas      int           `envconfig:"NATS_REPLICAS"`
	NATSMoveAfter     time.Duration `envconfig:"NATS_MOVE_AFTER" default:"10s"`
	EventsMaxAge      time.Duration `envconfig:"EVENTS_MAX_AGE"`
	StateTTL          time.Duration `envconfig:"STATE_TTL"`
	PresignTTL        time.Duration `envconfig:"PRESIGN_TTL"`
	S3CreateBucket    bool          `envconfig:"S3_CREATE_BUCKET" default:"true"`
	DevNATSPort       int           `envconfig:"DEV_NATS_PORT" default:"4222"`
	DevS3Addr         string        `envconfig:"DEV_S3_ADDR" default:"127.0.0.1:7070"`
	DevSimTaskTime    time.Duration `envconfig:"DEV_SIM_TASK_TIME" default:"3s"`
	DevSimComputeTime time.Duration `envconfig:"DEV_SIM_COMPUTE_TIME" default:"4s"`
	SweepInterval     time.Duration `envconfig:"SWEEP_INTERVAL"`
	PriorityAging     time.Duration `envconfig:"PRIORITY_AGING"`
	// Webhooks runs the webhook dispatcher and sender (docs/webhooks.md)
	// in this worker; any number of workers may.
	Webhooks           bool          `envconfig:"WEBHOOKS" default:"true"`
	WebhookConcurrency int           `envconfig:"WEBHOOK_CONCURRENCY" default:"32"`
	WebhookPerEndpoint int           `envconfig:"WEBHOOK_ENDPOINT_CONCURRENCY" default:"4"`
	WebhookTimeout     time.Duration `envconfig:"WEBHOOK_TIMEOUT" default:"15s"`

	// S3AccessKeyID and S3SecretAccessKey replace the AWS credential chain
	// when both are set. They are never read from the environment (the
	// contract's credentials come from the AWS chain); the embedded default
	// and tests set them.
	S3AccessKeyID     string `ignored:"true"`
	S3SecretAccessKey string `ignored:"true"`

	// Tracing is what the worker reads of the standard OTEL_* variables
	// (TracingFromEnv); the OTLP exporter reads the others itself.
	Tracing tracing.Config `ignored:"true"`

	// Order, when set, replaces the live view of SLUICE_TENANTS as what
	// orders the starts (docs/lifecycle.md "Order of starts"): tests set
	// a policy of their own. It is not an environment variable.
	Order order.Policy `ignored:"true"`

	// FaultClockOffset is added to every wall-clock reading the worker
	// takes (Clock), to test a fleet whose clocks disagree. Only a worker
	// built with the faults tag reads it from the environment
	// (SLUICE_FAULT_CLOCK_OFFSET, faults.go); tests set it in code.
	FaultClockOffset time.Duration `ignored:"true"`
}

// Clock is the worker's wall clock: time.Now, moved by FaultClockOffset.
// Its readings keep time.Now's monotonic reading, so the durations the
// worker measures between two of them are true whatever the offset.
func (c *Config) Clock() func() time.Time {
	off := c.FaultClockOffset
	if off == 0 {
		return time.Now
	}
	return func() time.Time { return time.Now().Add(off) }
}

// Load reads the environment and validates the result.
func Load() (*Config, error) {
	c, err := Parse()
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Parse reads the environment without validating, for callers that set
// some fields themselves before calling Validate. A value that cannot be
// parsed is reported with every other such value, each naming its
// variable. With SLUICE_DEV=true the dev defaults (DevDefaults) replace
// the production ones for the variables that are not set.
func Parse() (*Config, error) {
	var c Config
	err := envconfig.Process(Prefix, &c)
	if err != nil {
		return nil, parseErrors(err)
	}
	if err := parseFaults(&c); err != nil {
		return nil, err
	}
	if c.WorkerName == "" {
		c.WorkerName = defaultWorkerName()
	}
	c.applyUnset(componentDefaults)
	c.Tracing, err = TracingFromEnv()
	if err != nil {
		return nil, err
	}
	if c.Dev {
		c.DevDefaults()
	}
	return &c, nil
}

// defaultWorkerName is the container's name inside Docker when the
// network's DNS knows it (compose: "<project>-worker-2" or
// "<project>_worker_2", the service and its replica), else
// "<hostname>-<pid>". A container's hostname is its id, which says nothing.
func defaultWorkerName() string {
	host, _ := os.Hostname()
	if _, err := os.Stat("/.dockerenv"); err == nil {
		if name := containername.Lookup(host); name != "" {
			return name
		}
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// parseErrors turns envconfig's first parse error into the list of every
// variable that cannot be parsed: envconfig stops at the first, so each
// field is parsed again on its own.
func parseErrors(first error) error {
	var pe *envconfig.ParseError
	if !errors.As(first, &pe) {
		return first
	}
	var errs []error
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Tag.Get("ignored") == "true" {
			continue
		}
		one := reflect.New(reflect.StructOf([]reflect.StructField{{Name: f.Name, Type: f.Type, Tag: f.Tag}}))
		if err := envconfig.Process(Prefix, one.Interface()); errors.As(err, &pe) {
			errs = append(errs, fmt.Errorf("%s: cannot parse %q: %s", pe.KeyName, pe.Value, wantOf(pe.TypeName)))
		}
	}
	if len(errs) == 0 {
		return first
	}
	return errors.Join(errs...)
}

// wantOf says what a value of a Config field's type looks like.
func wantOf(typeName string) string {
	switch typeName {
	case "time.Duration":
		return "want a duration like 5s, 2m or 1h30m"
	case "bool":
		return "want true or false"
	case "int", "int64":
		return "want a whole number"
	case "float64":
		return "want a number"
	case "config.ByteSize":
		return "want a size like 8MiB, 512KiB or 1048576"
	}
	return "want a " + typeName
}

// envDefault sets the default of the variable Prefix_name on a Config.
type envDefault struct {
	name string
	set  func(*Config)
}

// componentDefaults are the defaults a component states (see Config).
var componentDefaults = []envDefault{
	{"MAX_INFLIGHT", func(c *Config) { c.MaxInflight = consumer.DefaultMaxInflight }},
	{"SHUTDOWN_TIMEOUT", func(c *Config) { c.ShutdownTimeout = consumer.DefaultShutdownTimeout }},
	{"ACK_WAIT", func(c *Config) { c.AckWait = consumer.DefaultAckWait }},
	{"SWEEP_INTERVAL", func(c *Config) { c.SweepInterval = consumer.DefaultSweepInterval }},
	{"COMPUTE_POLL_INTERVAL", func(c *Config) { c.ComputePoll = runner.DefaultComputePoll }},
	{"MAX_ARTIFACT_BYTES", func(c *Config) { c.MaxArtifactBytes = runner.DefaultMaxArtifactBytes }},
	{"PREFLIGHT", func(c *Config) { c.Preflight = runner.PreflightStrict }},
	{"MAX_DELIVER", func(c *Config) { c.MaxDeliver = runner.DefaultMaxDeliver }},
	{"TASK_TIMEOUT", func(c *Config) { c.TaskTimeout = runner.DefaultTaskTimeout }},
	{"MEDIA_QUOTA_RETRY", func(c *Config) { c.MediaQuotaRetry = runner.DefaultQuotaRetry }},
	{"MEDIA_QUOTA_WAIT", func(c *Config) { c.MediaQuotaWait = runner.DefaultQuotaWait }},
	{"STORE_REFUSAL_LIMIT", func(c *Config) { c.StoreRefusalLimit = runner.DefaultStoreRefusalLimit }},
	{"COMPUTE_TIMEOUT", func(c *Config) { c.ComputeTimeout = runner.DefaultComputeTimeout }},
	{"COPY_CONCURRENCY", func(c *Config) { c.CopyConcurrency = runner.DefaultCopyConcurrency }},
	{"PREFLIGHT_CONCURRENCY", func(c *Config) { c.PreflightConc = runner.DefaultPreflightConcurrency }},
	{"NATS_REPLICAS", func(c *Config) { c.NATSReplicas = contract.DefaultReplicas }},
	{"EVENTS_MAX_AGE", func(c *Config) { c.EventsMaxAge = contract.DefaultEventsMaxAge }},
	{"STATE_TTL", func(c *Config) { c.StateTTL = contract.DefaultStateTTL }},
	{"PRESIGN_TTL", func(c *Config) { c.PresignTTL = runner.DefaultPresignTTL }},
	{"PRIORITY_AGING", func(c *Config) { c.PriorityAging = consumer.DefaultPriorityAging }},
	{"WEBHOOK_CONCURRENCY", func(c *Config) { c.WebhookConcurrency = webhooks.DefaultConcurrency }},
	{"WEBHOOK_ENDPOINT_CONCURRENCY", func(c *Config) { c.WebhookPerEndpoint = webhooks.DefaultPerEndpoint }},
	{"WEBHOOK_TIMEOUT", func(c *Config) { c.WebhookTimeout = webhooks.DefaultTimeout }},
}

// devDefaults are the defaults that differ in dev mode: the embedded
// simulators finish a task in seconds, so polls come often enough that the
// tour is not spent waiting for the next one; and the console and metrics
// listen on loopback like the embedded NATS and S3 store.
var devDefaults = []envDefault{
	{"POLL_FIRST", func(c *Config) { c.PollFirst = 200 * time.Millisecond }},
	{"POLL_INTERVAL", func(c *Config) { c.PollInterval = time.Second }},
	{"COMPUTE_POLL_INTERVAL", func(c *Config) { c.ComputePoll = 500 * time.Millisecond }},
	{"HTTP_ADDR", func(c *Config) { c.HTTPAddr = DevHTTPAddr }},
}

// applyUnset applies each of defaults whose variable the environment does
// not set: an explicit value, even an invalid one, is left for Validate.
func (c *Config) applyUnset(defaults []envDefault) {
	for _, d := range defaults {
		if _, set := os.LookupEnv(Prefix + "_" + d.name); !set {
			d.set(c)
		}
	}
}

// defaultOf is the default of field i of Config that defaults sets, as a
// variable would be written ("" when none does).
func defaultOf(defaults []envDefault, name string, i int) string {
	for _, d := range defaults {
		if d.name != name {
			continue
		}
		var c Config
		d.set(&c)
		v := reflect.ValueOf(c).Field(i).Interface()
		if d, ok := v.(time.Duration); ok {
			return durationText(d)
		}
		return fmt.Sprint(v)
	}
	return ""
}

// durationText writes d as docs/configuration.md does: whole hours in
// hours (168h, not 168h0m0s), whole minutes past one in minutes (5m), other
// whole seconds in seconds (60s, 30s), anything finer as Go does (200ms).
func durationText(d time.Duration) string {
	switch {
	case d <= 0 || d%time.Second != 0:
		return d.String()
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0 && d > time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

// DevHTTPAddr is SLUICE_HTTP_ADDR's default in dev mode.
const DevHTTPAddr = "127.0.0.1:9090"

// DevDefaults applies the dev-mode defaults (SLUICE_POLL_FIRST 200ms,
// SLUICE_POLL_INTERVAL 1s, SLUICE_COMPUTE_POLL_INTERVAL 500ms,
// SLUICE_HTTP_ADDR 127.0.0.1:9090) to the
// variables that are not set in the environment: an explicit value wins.
// Parse calls it when SLUICE_DEV=true; a caller that turns Dev on itself
// calls it after.
func (c *Config) DevDefaults() { c.applyUnset(devDefaults) }

// Validate checks every value and reports all problems at once, each naming
// its variable.
func (c *Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s_%s: %s", Prefix, name, fmt.Sprintf(format, args...)))
	}
	if _, err := c.NATSSecurity().Options(); err != nil {
		errs = append(errs, err)
	}
	if _, err := c.ModelCatalog(); err != nil {
		bad("MEDIA_MODELS", "%v", err)
	}
	if len(c.Kinds) == 0 {
		bad("KINDS", "must name at least one of %s", strings.Join(contract.Kinds, ", "))
	}
	for _, k := range c.Kinds {
		if !slices.Contains(contract.Kinds, k) {
			bad("KINDS", "unknown kind %q (want %s)", k, strings.Join(contract.Kinds, ", "))
		}
	}
	if c.S3Bucket == "" && !c.Dev {
		bad("S3_BUCKET", "required unless SLUICE_DEV=true")
	}
	if strings.HasPrefix(c.S3Prefix, "/") || strings.HasSuffix(c.S3Prefix, "/") || strings.Contains(c.S3Prefix, "..") {
		bad("S3_PREFIX", "must not start or end with / or contain ..")
	}
	switch {
	case c.ComputeAccessKey != "" && c.ComputeSecretKey == "":
		bad("COMPUTE_SECRET_KEY", "is required with SLUICE_COMPUTE_ACCESS_KEY")
	case c.ComputeAccessKey == "" && c.ComputeSecretKey != "":
		bad("COMPUTE_ACCESS_KEY", "is required with SLUICE_COMPUTE_SECRET_KEY")
	case c.ComputeAccessKey != "" && c.ComputeUser == "":
		bad("COMPUTE_USER", "is required with SLUICE_COMPUTE_ACCESS_KEY")
	}
	if c.ComputeChunkSize < 0 {
		bad("COMPUTE_CHUNK_SIZE", "must be 0 (never chunk) or a positive size like 8MiB")
	}
	for name, u := range map[string]string{"S3_ENDPOINT": c.S3Endpoint, "MEDIA_BASE_URL": c.MediaBaseURL, "COMPUTE_BASE_URL": c.ComputeBaseURL, "COMPUTE_AUTH_URL": c.ComputeAuthURL} {
		if u == "" {
			continue
		}
		// The upstream clients' rule for a base address serves the S3
		// endpoint as well.
		if _, err := apiclient.ParseBaseURL(u); err != nil {
			bad(name, "%v", err)
		}
	}
	positive := map[string]int64{
		"MAX_INFLIGHT": int64(c.MaxInflight), "MAX_DELIVER": int64(c.MaxDeliver),
		"MEDIA_MAX_CONCURRENCY": int64(c.MediaConcurrency), "COMPUTE_MAX_CONCURRENCY": int64(c.ComputeConc),
		"COPY_CONCURRENCY": int64(c.CopyConcurrency), "MAX_ARTIFACT_BYTES": c.MaxArtifactBytes,
		"NATS_REPLICAS": int64(c.NATSReplicas),
	}
	for name, v := range positive {
		if v <= 0 {
			bad(name, "must be positive")
		}
	}
	// 0 takes the webhooks' defaults (a config made in code).
	if c.WebhookConcurrency < 0 || c.WebhookPerEndpoint < 0 || c.WebhookTimeout < 0 {
		bad("WEBHOOK_CONCURRENCY/WEBHOOK_ENDPOINT_CONCURRENCY/WEBHOOK_TIMEOUT", "must be positive")
	}
	for name, v := range map[string]float64{
		"FLEET_MEDIA_TASKS": float64(c.FleetMediaTasks), "FLEET_MEDIA_RATE": c.FleetMediaRate,
		"FLEET_COMPUTE_JOBS": float64(c.FleetComputeJobs), "FLEET_COMPUTE_RATE": c.FleetComputeRate,
		"FLEET_CONTAINERS": float64(c.FleetContainers),
	} {
		if v < 0 {
			bad(name, "must be 0 (no limit) or positive")
		}
	}
	// 0 takes the watchdog's default (3 and 10).
	if (c.StuckFactor != 0 && c.StuckFactor < 1) || (c.StuckHandBack != 0 && c.StuckHandBack < max(c.StuckFactor, 1)) {
		bad("STUCK_FACTOR/STUCK_HANDBACK_FACTOR", "must be at least 1, and SLUICE_STUCK_HANDBACK_FACTOR at least SLUICE_STUCK_FACTOR")
	}
	if c.PartSize < 5<<20 {
		bad("S3_PART_SIZE", "must be at least 5 MiB (S3's minimum part size)")
	}
	if c.MediaRate <= 0 || c.ComputeRate <= 0 {
		bad("MEDIA_RATE_LIMIT/COMPUTE_RATE_LIMIT", "must be positive requests per second")
	}
	durations := map[string]time.Duration{
		"POLL_INTERVAL": c.PollInterval, "POLL_FIRST": c.PollFirst, "COMPUTE_POLL_INTERVAL": c.ComputePoll, "SHUTDOWN_TIMEOUT": c.ShutdownTimeout,
		"TASK_TIMEOUT": c.TaskTimeout, "COMPUTE_TIMEOUT": c.ComputeTimeout, "EVENTS_MAX_AGE": c.EventsMaxAge,
		"STATE_TTL": c.StateTTL, "PRESIGN_TTL": c.PresignTTL, "DEV_SIM_TASK_TIME": c.DevSimTaskTime,
		"DEV_SIM_COMPUTE_TIME": c.DevSimComputeTime, "SWEEP_INTERVAL": c.SweepInterval,
	}
	for name, d := range durations {
		if d <= 0 {
			bad(name, "must be a positive duration like 5s or 2m")
		}
	}
	if c.PriorityAging < 0 {
		bad("PRIORITY_AGING", "must be a duration like 10m, or 0 for never")
	}
	// 0 (a Config made in code) takes the runner's defaults, those of the
	// environment.
	if c.MediaQuotaRetry < 0 || c.MediaQuotaWait < 0 {
		bad("MEDIA_QUOTA_RETRY/MEDIA_QUOTA_WAIT", "must be a positive duration like 5m or 24h")
	}
	if c.StoreRefusalLimit < 0 {
		bad("STORE_REFUSAL_LIMIT", "must be a positive duration like 30m or 4h")
	}
	if c.NATSMoveAfter < 0 {
		bad("NATS_MOVE_AFTER", "must be a duration like 10s, or 0 to never move")
	}
	if c.AckWait < time.Second {
		bad("ACK_WAIT", "must be at least 1s")
	}
	if c.PreflightConc < 0 {
		bad("PREFLIGHT_CONCURRENCY", "must be positive")
	}
	switch c.Preflight {
	case "", "strict", "off": // "" is strict
	default:
		bad("PREFLIGHT", "must be strict or off, not %q", c.Preflight)
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		bad("LOG_FORMAT", "must be json or console, not %q", c.LogFormat)
	}
	switch c.LogLevel {
	case "trace", "debug", "info", "warn", "error", "fatal", "panic", "disabled":
	default:
		bad("LOG_LEVEL", "must be one of trace, debug, info, warn, error, disabled; not %q", c.LogLevel)
	}
	if err := c.Tracing.Validate(); err != nil {
		errs = append(errs, err)
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// TracingFromEnv reads the OTEL_* variables that decide whether and how
// traces are exported (docs/configuration.md, "Traces").
func TracingFromEnv() (tracing.Config, error) { return tracing.FromEnv(os.Getenv) }

// NATSSecurity is the credentials file and the TLS files towards NATS.
func (c *Config) NATSSecurity() natsconn.Security {
	return natsconn.Security{CredsFile: c.NATSCreds, TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey}
}

// Serves reports whether the worker serves kind.
func (c *Config) Serves(kind string) bool { return slices.Contains(c.Kinds, kind) }

// ModelCatalog returns the model catalog in force: the shipped one, or
// the one SLUICE_MEDIA_MODELS names (docs/job-spec.md#the-model-catalog)
// loaded over it. A file that cannot be read, does not parse or names an
// unknown field is an error naming its line.
func (c *Config) ModelCatalog() (*models.Catalog, error) {
	if c.MediaModels == "" {
		return models.Shipped(), nil
	}
	return models.Load(c.MediaModels)
}

// Summary returns the configuration without secrets, for the start-up log.
func (c *Config) Summary() map[string]any {
	return map[string]any{
		"dev": c.Dev, "nats_url": redact.ServerURLs(c.NATSURL), "kinds": c.Kinds, "s3_endpoint": c.S3Endpoint,
		"s3_bucket": c.S3Bucket, "s3_prefix": c.S3Prefix, "media_base_url": c.MediaBaseURL,
		"media_api_key_set": c.MediaAPIKey != "", "media_models": c.MediaModels, "console": c.Console, "console_token_set": c.ConsoleToken != "", "api_addr": c.APIAddr, "compute_base_url": c.ComputeBaseURL,
		"compute_user_set": c.ComputeUser != "", "compute_access_key_set": c.ComputeAccessKey != "",
		"compute_secret_key_set": c.ComputeSecretKey != "", "compute_auth_url": c.ComputeAuthURL,
		"compute_region": c.ComputeRegion, "compute_chunk_size": int64(c.ComputeChunkSize), "max_inflight": c.MaxInflight,
		"poll_interval": c.PollInterval.String(), "compute_poll_interval": c.ComputePoll.String(),
		"allow_private_urls": c.AllowPrivateURLs, "preflight": c.Preflight, "ack_wait": c.AckWait.String(), "worker": c.WorkerName,
		"nats_move_after": c.NATSMoveAfter.String(), "traces": c.Tracing.On(),
		"fleet_media_tasks": c.FleetMediaTasks, "fleet_media_rate": c.FleetMediaRate,
		"fleet_compute_jobs": c.FleetComputeJobs, "fleet_compute_rate": c.FleetComputeRate, "fleet_containers": c.FleetContainers,
	}
}

// Usage writes every variable with its default, in the order of Config,
// for the worker's --help.
func Usage(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT")
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("envconfig")
		if name == "" || f.Tag.Get("ignored") == "true" {
			continue
		}
		def := cmp.Or(f.Tag.Get("default"), defaultOf(componentDefaults, name, i), "-")
		if dev := defaultOf(devDefaults, name, i); dev != "" {
			def += " (dev: " + dev + ")"
		}
		fmt.Fprintf(tw, "  %s_%s\t%s\n", Prefix, name, def)
	}
	return tw.Flush()
}

// CheckUpstreams reports every served kind whose upstream has no address:
// video and speech need SLUICE_MEDIA_BASE_URL, compute and container
// SLUICE_COMPUTE_BASE_URL. The worker checks it once the embedded default
// (SLUICE_DEV) has pointed the unset ones at its simulators, so that a
// production worker refuses to start instead of failing each job; Load
// does not, since a worker may be configured in steps.
func (c Config) CheckUpstreams() error {
	needs := []struct {
		kinds []string
		name  string
		url   string
	}{
		{[]string{"video", "speech"}, "MEDIA_BASE_URL", c.MediaBaseURL},
		{[]string{"compute", "container"}, "COMPUTE_BASE_URL", c.ComputeBaseURL},
	}
	var errs []error
	for _, n := range needs {
		var served []string
		for _, k := range n.kinds {
			if slices.Contains(c.Kinds, k) {
				served = append(served, k)
			}
		}
		if n.url == "" && len(served) > 0 {
			errs = append(errs, fmt.Errorf("%s_%s: not set, and %s_KINDS serves %s: set it, or leave %s out of %s_KINDS",
				Prefix, n.name, Prefix, strings.Join(served, " and "), strings.Join(served, " and "), Prefix))
		}
	}
	return errors.Join(errs...)
}
