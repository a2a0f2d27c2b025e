package jobclient

import (
	"context"
	"encoding/json"
	"errors"
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
	// With After, it bounds After's replay instead: when the events after
	// After go back further than Since, Watch starts Since ago. Defaults
	// to 0: only events published after Watch starts (or every event
	// after After).
	Since time.Duration
	// After resumes after a position on SLUICE_EVENTS, a WatchedEvent's
	// Seq or what EventsPosition answered: the events with a greater
	// sequence, oldest first, then the new ones. A position past the
	// stream's last event counts as its last (only new events). Defaults
	// to 0: no position.
	After uint64
}

// WatchedEvent is one event as Watch delivers it.
type WatchedEvent struct {
	// Subject is the NATS subject it was published on.
	Subject string
	// Seq is its sequence in SLUICE_EVENTS, for WatchOptions.After.
	Seq uint64
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
	stream, err := c.eventsStream(ctx)
	if err != nil {
		return err
	}
	filter := contract.EventsSubjectPrefix + ">"
	if o.Kind != "" {
		filter = contract.EventsSubjectPrefix + string(o.Kind) + ".>"
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy}
	from := c.now().Add(-o.Since).UTC()
	// after is o.After, or the stream's last event when it is past that.
	after := min(o.After, stream.CachedInfo().State.LastSeq)
	switch {
	case o.After > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
		if o.Since > 0 && firstBefore(ctx, stream, after+1, filter, from) {
			cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &from
		}
	case o.Since > 0:
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &from
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
		we := WatchedEvent{Subject: m.Subject()}
		if md, err := m.Metadata(); err == nil {
			if we.Seq = md.Sequence.Stream; we.Seq <= after {
				continue // started by time, Since ago: the caller has this one
			}
		}
		we.Raw = scrubEventJSON(m.Data())
		if err := json.Unmarshal(we.Raw, &we.Event); err != nil {
			we.Event, we.Err = events.Event{}, fmt.Errorf("message %s is not an event: %w", m.Subject(), err)
		}
		if err := fn(we); err != nil {
			return err
		}
	}
}

// firstBefore reports whether the first event on filter from sequence
// start on was published before t, or whether it cannot tell.
func firstBefore(ctx context.Context, stream jetstream.Stream, start uint64, filter string, t time.Time) bool {
	if start > stream.CachedInfo().State.LastSeq {
		return false
	}
	m, err := stream.GetMsg(ctx, start, jetstream.WithGetMsgSubject(filter))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	return err != nil || m.Time.Before(t)
}

// EventsPosition is the sequence of the last event on SLUICE_EVENTS, 0
// when there is none yet: Watch with After set to it delivers every event
// published after EventsPosition was called. It returns an error wrapping
// ErrNotSetUp when the stream does not exist.
func (c *Client) EventsPosition(ctx context.Context) (uint64, error) {
	stream, err := c.eventsStream(ctx)
	if err != nil {
		return 0, err
	}
	return stream.CachedInfo().State.LastSeq, nil
}
