package contract

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Options tunes the contract's JetStream objects. The zero value gives the
// contract's defaults.
type Options struct {
	// Replicas is the replica count of every stream and of the bucket.
	// Defaults to 1 (use 3 on a production cluster).
	Replicas int
	// EventsMaxAge is how long events are kept. Defaults to 7 days.
	EventsMaxAge time.Duration
	// DLQMaxAge is how long dead letters are kept. Defaults to 30 days.
	DLQMaxAge time.Duration
	// StateTTL is how long a job's state record outlives its last write.
	// Defaults to 30 days.
	StateTTL time.Duration
	// AckWait is how long a delivered job may go without an ack or an
	// InProgress heartbeat before JetStream redelivers it. Defaults to 60s.
	AckWait time.Duration
	// MaxAckPending bounds the jobs of one kind held by the whole fleet at
	// once, delayed Naks included. Defaults to 100000.
	MaxAckPending int
}

// The defaults of Options. internal/config takes SLUICE_NATS_REPLICAS,
// SLUICE_EVENTS_MAX_AGE and SLUICE_STATE_TTL's defaults from here, and the
// runner its StateTTL's, so each is stated once.
const (
	DefaultReplicas      = 1
	DefaultEventsMaxAge  = 7 * 24 * time.Hour
	DefaultDLQMaxAge     = 30 * 24 * time.Hour
	DefaultStateTTL      = 30 * 24 * time.Hour
	DefaultAckWait       = 60 * time.Second
	DefaultMaxAckPending = 100000
)

func (o Options) withDefaults() Options {
	o.Replicas = cmp.Or(o.Replicas, DefaultReplicas)
	o.EventsMaxAge = cmp.Or(o.EventsMaxAge, DefaultEventsMaxAge)
	o.DLQMaxAge = cmp.Or(o.DLQMaxAge, DefaultDLQMaxAge)
	o.StateTTL = cmp.Or(o.StateTTL, DefaultStateTTL)
	o.AckWait = cmp.Or(o.AckWait, DefaultAckWait)
	o.MaxAckPending = cmp.Or(o.MaxAckPending, DefaultMaxAckPending)
	return o
}

// dedupeWindow is the duplicate window of the jobs and events streams.
const dedupeWindow = time.Hour

// JobsStreamConfig is the definition of SLUICE_JOBS.
func JobsStreamConfig(o Options) jetstream.StreamConfig {
	o = o.withDefaults()
	return jetstream.StreamConfig{
		Name:        JobsStream,
		Description: "sluice job specs, one per message, consumed once",
		Subjects:    []string{JobsSubjectPrefix + ">"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  dedupeWindow,
		Replicas:    o.Replicas,
		// A spec is at most 1 MiB; headers come on top.
		MaxMsgSize: 1<<20 + 64<<10,
		// At a byte or message limit an operator sets, a publish is
		// refused (the producer is told) rather than a queued job
		// dropped.
		Discard: jetstream.DiscardNew,
	}
}

// EnsureJobsStream creates SLUICE_JOBS when it does not exist and leaves
// an existing one as it is (its replicas and limits are the worker's to
// set). It is what producers call before publishing.
func EnsureJobsStream(ctx context.Context, js jetstream.JetStream, o Options) error {
	_, err := js.Stream(ctx, JobsStream)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("look up stream %s: %w", JobsStream, err)
	}
	if _, err := js.CreateStream(ctx, JobsStreamConfig(o)); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return fmt.Errorf("create stream %s: %w", JobsStream, err)
	}
	return nil
}

// Ensure creates or updates every stream, consumer and the bucket of the
// contract. It is idempotent: a second call with the same options changes
// nothing on the server.
func Ensure(ctx context.Context, js jetstream.JetStream, o Options) error {
	o = o.withDefaults()
	streams := []jetstream.StreamConfig{
		JobsStreamConfig(o),
		{
			Name:        EventsStream,
			Description: "sluice job events (CloudEvents)",
			Subjects:    []string{EventsSubjectPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      o.EventsMaxAge,
			Duplicates:  dedupeWindow,
			Replicas:    o.Replicas,
			// At a byte or message limit an operator sets, a publish is
			// refused (the worker holds the job and retries) rather than
			// an unread event dropped.
			Discard: jetstream.DiscardNew,
		},
		{
			Name:        DLQStream,
			Description: "sluice dead letters: messages that could not be processed",
			Subjects:    []string{DLQSubjectPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			MaxAge:      o.DLQMaxAge,
			Replicas:    o.Replicas,
		},
	}
	for _, cfg := range streams {
		if err := keepSizeLimits(ctx, js, &cfg); err != nil {
			return err
		}
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("ensure stream %s: %w", cfg.Name, err)
		}
	}
	for _, kind := range Kinds {
		if _, err := js.CreateOrUpdateConsumer(ctx, JobsStream, ConsumerConfig(kind, o)); err != nil {
			return fmt.Errorf("ensure consumer %s: %w", ConsumerName(kind), err)
		}
	}
	for _, cfg := range []jetstream.KeyValueConfig{StateBucketConfig(o), SpecsBucketConfig(o), TenantsBucketConfig(o), KeysBucketConfig(o)} {
		limits := jetstream.StreamConfig{Name: "KV_" + cfg.Bucket}
		if err := keepSizeLimits(ctx, js, &limits); err != nil {
			return err
		}
		cfg.MaxBytes = limits.MaxBytes
		if _, err := js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
			return fmt.Errorf("ensure bucket %s: %w", cfg.Bucket, err)
		}
	}
	return nil
}

// keepSizeLimits carries an existing stream's (or bucket's) byte and
// message limits into cfg: the contract sets none, and those an operator
// set (see
// docs/operating.md, "JetStream out of space") stay.
func keepSizeLimits(ctx context.Context, js jetstream.JetStream, cfg *jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", cfg.Name, err)
	}
	cur := s.CachedInfo().Config
	cfg.MaxBytes, cfg.MaxMsgs = cur.MaxBytes, cur.MaxMsgs
	return nil
}

// ConsumerConfig is the definition of kind's durable pull consumer: it
// serves sluice.jobs.<kind> and kind's tenant subjects (TenantsFilter).
// MaxDeliver is unlimited on purpose: the worker enforces its own delivery
// limit so that a job past it still gets its failed event and dead letter
// instead of silently stopping to be delivered. BackOff is unset because
// the worker always Naks with an explicit delay.
func ConsumerConfig(kind string, o Options) jetstream.ConsumerConfig {
	o = o.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:     ConsumerName(kind),
		Description: "sluice workers serving " + kind + " jobs",
		// A durable made with FilterSubject alone is updated in place:
		// the server changes a consumer's filters without a new one.
		FilterSubjects: []string{JobSubject(kind), TenantsFilter(kind)},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        o.AckWait,
		MaxDeliver:     -1,
		MaxAckPending:  o.MaxAckPending,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
}

// StateBucketConfig is the definition of the SLUICE_STATE bucket.
func StateBucketConfig(o Options) jetstream.KeyValueConfig {
	o = o.withDefaults()
	return jetstream.KeyValueConfig{
		Bucket:      StateBucket,
		Description: "sluice job state records, key = job id",
		History:     1,
		TTL:         o.StateTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}

// SpecsBucketConfig is the definition of the SLUICE_SPECS bucket: the
// specs are kept as long as the state records (StateTTL).
func SpecsBucketConfig(o Options) jetstream.KeyValueConfig {
	cfg := StateBucketConfig(o)
	cfg.Bucket, cfg.Description = SpecsBucket, "sluice job specs as received, key = job id"
	// A spec is at most 1 MiB.
	cfg.MaxValueSize = 1<<20 + 64<<10
	return cfg
}

// TenantsBucketConfig is the definition of the SLUICE_TENANTS bucket:
// settings, prices and ledger days are kept until changed or deleted.
func TenantsBucketConfig(o Options) jetstream.KeyValueConfig {
	o = o.withDefaults()
	return jetstream.KeyValueConfig{
		Bucket:      TenantsBucket,
		Description: "sluice tenants: settings, prices, budget ledger",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}

// KeysMarkerTTL is how long SLUICE_KEYS keeps the marker of a record
// that expired. It is a constant, not an option: `enqueue keys` creates
// the bucket the worker updates, and both must ask the same.
const KeysMarkerTTL = time.Hour

// KeysBucketConfig is the definition of the SLUICE_KEYS bucket: keys are
// kept until revoked or deleted; job owners and idempotency keys carry
// their own lifetime (SLUICE_STATE_TTL, set per key when written), which
// LimitMarkerTTL allows. Applied to a bucket of an earlier version, it
// turns that on in place; the server cannot turn it off again.
func KeysBucketConfig(o Options) jetstream.KeyValueConfig {
	cfg := TenantsBucketConfig(o)
	cfg.Bucket, cfg.Description = KeysBucket, "sluice HTTP API: key hashes, job owners, idempotency keys"
	cfg.LimitMarkerTTL = KeysMarkerTTL
	return cfg
}

// Present reports whether every stream and the bucket of the contract exist,
// for readiness checks.
func Present(ctx context.Context, js jetstream.JetStream) error {
	for _, name := range []string{JobsStream, EventsStream, DLQStream} {
		if _, err := js.Stream(ctx, name); err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
	}
	if _, err := js.KeyValue(ctx, StateBucket); err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("bucket %s: %w", StateBucket, err)
		}
		return err
	}
	return nil
}
