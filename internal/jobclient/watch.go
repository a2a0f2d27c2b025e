package jobclient

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
)

// WatchOptions tunes Watch.
type WatchOptions struct {
	// Kind limits the events to one kind. Defaults to every kind.
	Kind jobspec.Kind
	// Since replays the events of this past period before the new ones.
	// Defaults to 0: only events published after Watch starts.
	Since time.Duration
}

// WatchedEvent is one event as Watch delivers it.
type WatchedEvent struct {
	// Subject is the NATS subject it was published on.
	Subject string
	// Raw is the event's JSON, with every artifact URL passed through
	// redact.URL (byte for byte the published event when nothing needed
	// scrubbing).
	Raw json.RawMessage
	// Event is Raw decoded; the zero Event when Err is set.
	Event events.Event
	// Err is set when the message is not an event.
	Err error
}

// Watch calls fn with every event on SLUICE_EVENTS, oldest first, until ctx
// ends (then it returns nil) or fn returns an error (which it returns). It
// returns an error wrapping ErrNotSetUp when the stream does not exist.
func (c *Client) Watch(ctx context.Context, o WatchOptions, fn func(WatchedEvent) error) error {
	if o.Kind != "" && !o.Kind.Valid() {
		return fmt.Errorf("watch: %w", jobspec.ErrUnknownKind)
	}
	if o.Since < 0 {
		return fmt.Errorf("watch: Since must not be negative, got %s", o.Since)
	}
	if err := c.eventsStream(ctx); err != nil {
		return err
	}
	filter := contract.EventsSubjectPrefix + ">"
	if o.Kind != "" {
		filter = contract.EventsSubjectPrefix + string(o.Kind) + ".>"
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy}
	if o.Since > 0 {
		start := c.now().Add(-o.Since).UTC()
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	cons, err := c.js.OrderedConsumer(ctx, contract.EventsStream, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.jsErr(fmt.Errorf("follow %s: %w", contract.EventsStream, err))
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("follow %s: %w", contract.EventsStream, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("follow %s: %w", contract.EventsStream, err)
		}
		we := WatchedEvent{Subject: m.Subject(), Raw: scrubEventJSON(m.Data())}
		if err := json.Unmarshal(we.Raw, &we.Event); err != nil {
			we.Event, we.Err = events.Event{}, fmt.Errorf("message %s is not an event: %w", m.Subject(), err)
		}
		if err := fn(we); err != nil {
			return err
		}
	}
}
