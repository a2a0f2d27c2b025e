package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/contract"
)

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	// JS, Store and Cache are required.
	JS    jetstream.JetStream
	Store *Store
	Cache *Cache
	// Specs is SLUICE_SPECS, where a job's notify.webhook is read; nil:
	// jobs' own webhooks are not sent.
	Specs jetstream.KeyValue
	// Now defaults to time.Now.
	Now func() time.Time
	Log zerolog.Logger
}

// Dispatcher turns each event of SLUICE_EVENTS into one delivery message
// per destination and acks the event only once they are all stored, so
// that a crash loses none (an event handled twice yields the same
// messages, deduplicated by their id).
type Dispatcher struct{ cfg DispatcherConfig }

// NewDispatcher returns a Dispatcher.
func NewDispatcher(cfg DispatcherConfig) *Dispatcher {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Dispatcher{cfg: cfg}
}

// Run dispatches events until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	cons, err := consumer(ctx, d.cfg.JS, contract.EventsStream, contract.WebhooksEventsConsumer, d.cfg.Log)
	if err != nil {
		return err
	}
	return pull(ctx, cons, 8, d.cfg.Log, func(ctx context.Context, msg jetstream.Msg) {
		if err := d.dispatch(ctx, msg.Subject(), msg.Data()); err != nil {
			d.cfg.Log.Warn().Err(err).Str("subject", msg.Subject()).Msg("cannot dispatch event to webhooks; retrying")
			_ = msg.NakWithDelay(5 * time.Second)
			return
		}
		_ = msg.Ack()
	})
}

// eventHead is the part of an event that chooses its destinations.
type eventHead struct {
	ID   string `json:"id"`
	Data struct {
		JobID  string            `json:"job_id"`
		Kind   string            `json:"kind"`
		Status string            `json:"status"`
		Tenant string            `json:"tenant"`
		Labels map[string]string `json:"labels"`
	} `json:"data"`
}

// dispatch stores the deliveries of one event.
func (d *Dispatcher) dispatch(ctx context.Context, subject string, body []byte) error {
	var ev eventHead
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		d.cfg.Log.Warn().Str("subject", subject).Msg("event is not a CloudEvent with an id: no webhooks")
		return nil
	}
	x := ev.Data
	for _, sub := range d.cfg.Cache.Matching(x.Kind, x.Status, x.Tenant, x.Labels) {
		m := Message{Delivery: deliveryID(sub.ID, ev.ID), Sub: sub.ID, EventID: ev.ID, Event: body}
		if err := enqueue(ctx, d.cfg.JS, d.cfg.Store, m, Where(sub.URL), subject, 0, d.cfg.Now()); err != nil {
			return err
		}
	}
	own, err := d.notify(ctx, ev)
	if err != nil || own == nil {
		return err
	}
	own.Event = body
	return enqueue(ctx, d.cfg.JS, d.cfg.Store, *own, Where(own.URL), subject, 0, d.cfg.Now())
}

// notify is the delivery to the job's own notify.webhook, if it has one
// that wants this event.
func (d *Dispatcher) notify(ctx context.Context, ev eventHead) (*Message, error) {
	if d.cfg.Specs == nil || ev.Data.JobID == "" {
		return nil, nil
	}
	e, err := d.cfg.Specs.Get(ctx, ev.Data.JobID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read spec of %s: %w", ev.Data.JobID, err)
	}
	var spec struct {
		Tenant string `json:"tenant"`
		Notify *struct {
			Webhook *struct {
				URL    string   `json:"url"`
				Events []string `json:"events"`
			} `json:"webhook"`
		} `json:"notify"`
	}
	if json.Unmarshal(e.Value(), &spec) != nil || spec.Notify == nil || spec.Notify.Webhook == nil {
		return nil, nil
	}
	if !WantsStatus(spec.Notify.Webhook.Events, ev.Data.Status) {
		return nil, nil
	}
	tenant := ev.Data.Tenant
	if tenant == "" {
		tenant = "default"
	}
	secret, err := d.cfg.Store.NotifySecret(ctx, tenant, d.cfg.Now())
	if err != nil {
		return nil, err
	}
	return &Message{Delivery: deliveryID(secret.ID, ev.ID), Sub: secret.ID, URL: spec.Notify.Webhook.URL, EventID: ev.ID}, nil
}

// terminal are the statuses "terminal" stands for.
var terminal = []string{"succeeded", "failed", "cancelled"}

// WantsStatus reports whether a notify.webhook with events wants an event
// of status: "terminal" (also when events is empty), "all", or statuses.
func WantsStatus(events []string, status string) bool {
	if len(events) == 0 {
		events = []string{"terminal"}
	}
	for _, e := range events {
		if e == "all" || e == status || (e == "terminal" && slices.Contains(terminal, status)) {
			return true
		}
	}
	return false
}

// enqueue stores m's record (unless it exists) and publishes m; the
// message id makes a second publish of the same delivery a no-op inside
// the duplicate window (a replay publishes with a new one).
func enqueue(ctx context.Context, js jetstream.JetStream, st *Store, m Message, where, subject string, replay int, now time.Time) error {
	rec := Delivery{ID: m.Delivery, Sub: m.Sub, URL: m.URL, Where: where, EventID: m.EventID, Subject: subject,
		Status: StatusPending, Event: m.Event, Created: now.UTC(), Updated: now.UTC()}
	if err := st.CreateDelivery(ctx, rec); err != nil {
		return err
	}
	return publish(ctx, js, m, replay)
}

// publish puts the delivery message m on DeliveriesStream.
func publish(ctx context.Context, js jetstream.JetStream, m Message, replay int) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(contract.DeliverySubjectPrefix + m.Sub)
	msg.Data = data
	msg.Header.Set(contract.HeaderMsgID, fmt.Sprintf("%s.r%d", m.Delivery, replay))
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publish delivery %s: %w", m.Delivery, err)
	}
	return nil
}

// Replay sends the delivery id again (whatever became of it), with the
// same webhook-id, and returns its record.
func Replay(ctx context.Context, js jetstream.JetStream, st *Store, id string, now time.Time) (Delivery, error) {
	d, err := st.UpdateDelivery(ctx, id, func(d *Delivery) {
		d.Replays++
		d.Status, d.Updated = StatusPending, now.UTC()
	})
	if err != nil {
		return d, err
	}
	m := Message{Delivery: d.ID, Sub: d.Sub, URL: d.URL, EventID: d.EventID, Event: d.Event}
	return d, publish(ctx, js, m, d.Replays)
}
