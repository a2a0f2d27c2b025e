package webhooks

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
)

// Options tunes the JetStream objects of webhooks.
type Options struct {
	// Replicas of the stream and buckets. Defaults to 1.
	Replicas int
	// RecordsTTL is how long a delivery record is kept. Defaults to 7 days.
	RecordsTTL time.Duration
	// AckWait is both consumers' ack wait: longer than a delivery's HTTP
	// timeout and its record writes. Defaults to 60s.
	AckWait time.Duration
	// MaxAckPending bounds the deliveries the fleet holds at once, those
	// waiting for a failing receiver included. Defaults to 100000.
	MaxAckPending int
}

// Ensure creates or updates the deliveries stream, both buckets and both
// consumers, and returns the Store. It is idempotent.
func Ensure(ctx context.Context, js jetstream.JetStream, o Options) (*Store, error) {
	o.Replicas = cmp.Or(o.Replicas, 1)
	o.RecordsTTL = cmp.Or(o.RecordsTTL, contract.DefaultEventsMaxAge)
	o.MaxAckPending = cmp.Or(o.MaxAckPending, contract.DefaultMaxAckPending)
	o.AckWait = cmp.Or(o.AckWait, time.Minute)
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: contract.DeliveriesStream, Description: "sluice webhook deliveries, one per event and destination",
		Subjects: []string{contract.DeliverySubjectPrefix + ">"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: time.Hour, Replicas: o.Replicas, Discard: jetstream.DiscardNew,
	}); err != nil {
		return nil, fmt.Errorf("stream %s: %w", contract.DeliveriesStream, err)
	}
	subs, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: contract.WebhooksBucket, Description: "sluice webhook subscriptions and notify secrets",
		Storage: jetstream.FileStorage, Replicas: o.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", contract.WebhooksBucket, err)
	}
	recs, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: contract.RecordsBucket, Description: "sluice webhook delivery records",
		Storage: jetstream.FileStorage, Replicas: o.Replicas, TTL: o.RecordsTTL,
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", contract.RecordsBucket, err)
	}
	for _, c := range []struct {
		stream string
		cfg    jetstream.ConsumerConfig
	}{
		{contract.EventsStream, jetstream.ConsumerConfig{
			Durable: contract.WebhooksEventsConsumer, Description: "fans events out into webhook deliveries",
			FilterSubject: contract.EventsSubjectPrefix + ">", DeliverPolicy: jetstream.DeliverNewPolicy,
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.AckWait, MaxDeliver: -1, MaxAckPending: 1000,
			Replicas: o.Replicas,
		}},
		{contract.DeliveriesStream, jetstream.ConsumerConfig{
			Durable: contract.WebhooksSendConsumer, Description: "sends webhook deliveries",
			AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.AckWait, MaxDeliver: -1,
			MaxAckPending: o.MaxAckPending, Replicas: o.Replicas,
		}},
	} {
		if _, err := js.CreateOrUpdateConsumer(ctx, c.stream, c.cfg); err != nil {
			return nil, fmt.Errorf("consumer %s: %w", c.cfg.Durable, err)
		}
	}
	return NewStore(subs, recs), nil
}

// Open returns the Store of existing buckets (the CLI's).
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	subs, err := js.KeyValue(ctx, contract.WebhooksBucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s (is a worker running?): %w", contract.WebhooksBucket, err)
	}
	recs, err := js.KeyValue(ctx, contract.RecordsBucket)
	if err != nil {
		return nil, fmt.Errorf("bucket %s (is a worker running?): %w", contract.RecordsBucket, err)
	}
	return NewStore(subs, recs), nil
}
