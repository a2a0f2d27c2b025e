package webhooks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/contract"
)

// Defaults of SenderConfig (SLUICE_WEBHOOK_CONCURRENCY,
// SLUICE_WEBHOOK_ENDPOINT_CONCURRENCY, SLUICE_WEBHOOK_TIMEOUT).
const (
	DefaultConcurrency = 32
	DefaultPerEndpoint = 4
	DefaultTimeout     = 15 * time.Second
)

// Meter counts deliveries (internal/metrics implements it; nil: none).
type Meter interface {
	WebhookDelivered()
	WebhookFailed()
	WebhookRetrying()
	WebhookOldestPending(age time.Duration)
}

// SenderConfig configures a Sender.
type SenderConfig struct {
	// JS and Store are required; Cache is the subscriptions as the
	// dispatcher sees them.
	JS    jetstream.JetStream
	Store *Store
	Cache *Cache
	// Policy is checked again at every send and at connect time.
	Policy URLPolicy
	// Concurrency bounds this worker's deliveries in flight. Defaults to
	// DefaultConcurrency.
	Concurrency int
	// PerEndpoint bounds this worker's deliveries in flight to one
	// destination. Defaults to DefaultPerEndpoint.
	PerEndpoint int
	// Timeout bounds one POST, answer included. Defaults to
	// DefaultTimeout.
	Timeout time.Duration
	// Schedule spaces the retries. Defaults to Schedule.
	Schedule []time.Duration
	// Now defaults to time.Now.
	Now    func() time.Time
	Log    zerolog.Logger
	Metric Meter
}

// Sender posts the deliveries of DeliveriesStream.
type Sender struct {
	cfg     SenderConfig
	clients clients
	eps     *endpoints
	oldest  *oldest
}

// NewSender returns a Sender.
func NewSender(cfg SenderConfig) *Sender {
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.PerEndpoint = cmp.Or(cfg.PerEndpoint, DefaultPerEndpoint)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	if cfg.Schedule == nil {
		cfg.Schedule = Schedule
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Sender{cfg: cfg, clients: newClients(cfg.Policy, cfg.Timeout), eps: newEndpoints(cfg.PerEndpoint, cfg.Schedule), oldest: newOldest()}
}

// Run sends deliveries until ctx ends.
func (s *Sender) Run(ctx context.Context) error {
	cons, err := consumer(ctx, s.cfg.JS, contract.DeliveriesStream, contract.WebhooksSendConsumer, s.cfg.Log)
	if err != nil {
		return err
	}
	go s.oldest.report(ctx, s.cfg.Metric, s.cfg.Now)
	return pull(ctx, cons, s.cfg.Concurrency, s.cfg.Log, s.handle)
}

// verdict is what becomes of a delivery after an attempt.
type verdict int

const (
	delivered verdict = iota
	retry
	gaveUp
	gone
)

// handle sends one delivery, or parks it while its destination rests.
func (s *Sender) handle(ctx context.Context, msg jetstream.Msg) {
	var m Message
	if err := json.Unmarshal(msg.Data(), &m); err != nil || m.Delivery == "" {
		s.cfg.Log.Error().Msg("webhook delivery message is not a delivery: dropped")
		_ = msg.Term()
		return
	}
	now := s.cfg.Now()
	age := now.Sub(published(msg, now))
	s.oldest.add(m.Delivery, now.Add(-age), now)
	sub, ok, err := s.subscription(ctx, m.Sub)
	if err != nil {
		s.cfg.Log.Warn().Err(err).Str("delivery", m.Delivery).Msg("cannot read webhook subscription; retrying")
		_ = msg.NakWithDelay(jitter(probeWait))
		return
	}
	// Only a notify secret's deliveries name their URL (the job's own);
	// a subscription's always go to its URL, whatever the message says.
	url := sub.URL
	if sub.Notify {
		url = m.URL
	}
	why := ""
	switch err := s.cfg.Policy.CheckURL(url); {
	case !ok:
		why = "subscription removed"
	case sub.Disabled != "" && !sub.Notify:
		why = "subscription disabled: " + sub.Disabled
	case err != nil:
		why = err.Error()
	}
	if why != "" {
		s.finish(ctx, msg, m, StatusFailed, Attempt{At: now, Error: why})
		return
	}
	key := sub.ID + " " + url
	if admitted, wait, failing := s.eps.admit(key, now); !admitted {
		if failing && age > total(s.cfg.Schedule) {
			s.finish(ctx, msg, m, StatusFailed, Attempt{At: now, Error: "gave up: the destination kept failing"})
			return
		}
		_ = msg.NakWithDelay(wait)
		return
	}
	s.attempt(ctx, msg, m, sub, url, key)
}

// subscription is id as the cache has it, else as stored: a notify
// secret or subscription created a moment ago may not have reached the
// cache yet. ok is false when it does not exist.
func (s *Sender) subscription(ctx context.Context, id string) (sub Subscription, ok bool, err error) {
	if sub, ok = s.cfg.Cache.Get(id); ok {
		return sub, true, nil
	}
	sub, err = s.cfg.Store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return sub, false, nil
	}
	return sub, err == nil, err
}

// attempt posts m once and settles the message by the answer.
func (s *Sender) attempt(ctx context.Context, msg jetstream.Msg, m Message, sub Subscription, url, key string) {
	start := s.cfg.Now()
	a := post(ctx, s.clients, url, sub.Secrets(start), m.EventID, m.Event, start)
	if ctx.Err() != nil {
		// The worker stops: the attempt was cut short by us, not the
		// receiver. Another worker (or this one again) sends it.
		s.eps.done(key, true, 0, start)
		_ = msg.Nak()
		return
	}
	att := Attempt{At: start, Status: a.status, Millis: s.cfg.Now().Sub(start).Milliseconds()}
	if a.err != nil {
		att.Error = a.err.Error()
	}
	rec, recErr := s.record(ctx, m, att, StatusPending)
	// The delivery waits its own step, and at least as long as its
	// destination now rests.
	v, rest := s.judge(a, len(rec.Attempts), recErr == nil)
	rest = max(rest, s.eps.done(key, v == delivered, a.retryAfter, s.cfg.Now()))
	switch v {
	case delivered:
		s.finish(ctx, msg, m, StatusDelivered, Attempt{})
	case gone:
		if !sub.Notify {
			if err := s.cfg.Store.Disable(ctx, sub.ID, "receiver answered 410 Gone"); err != nil {
				s.cfg.Log.Warn().Err(err).Str("subscription", sub.ID).Msg("cannot disable webhook subscription")
			}
		}
		s.finish(ctx, msg, m, StatusFailed, Attempt{})
	case gaveUp:
		s.finish(ctx, msg, m, StatusFailed, Attempt{})
	case retry:
		if s.cfg.Metric != nil {
			s.cfg.Metric.WebhookRetrying()
		}
		s.cfg.Log.Info().Str("delivery", m.Delivery).Str("to", Where(url)).Int("status", a.status).
			Dur("retry_in", rest).Msg("webhook delivery failed; will retry")
		_ = msg.NakWithDelay(rest)
	}
}

// judge decides after an attempt answered a, the n-th of its delivery
// (0 when the record could not be read: the destination's count rules).
func (s *Sender) judge(a answer, n int, recorded bool) (verdict, time.Duration) {
	switch {
	case a.err == nil:
		return delivered, 0
	case a.status == http.StatusGone:
		return gone, 0
	}
	if !recorded {
		n = 1
	}
	rest, more := wait(s.cfg.Schedule, n, a.retryAfter)
	if !more {
		return gaveUp, 0
	}
	return retry, rest
}

// record appends att to m's record with status.
func (s *Sender) record(ctx context.Context, m Message, att Attempt, status string) (Delivery, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	d, err := s.cfg.Store.UpdateDelivery(rctx, m.Delivery, func(d *Delivery) {
		if !att.At.IsZero() {
			d.Attempts = append(d.Attempts, att)
		}
		d.Status, d.Updated = status, s.cfg.Now().UTC()
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		s.cfg.Log.Warn().Err(err).Str("delivery", m.Delivery).Msg("cannot record webhook delivery")
	}
	return d, err
}

// finish records m's end and acks it.
func (s *Sender) finish(ctx context.Context, msg jetstream.Msg, m Message, status string, att Attempt) {
	rec, _ := s.record(ctx, m, att, status)
	reason := att.Error
	if n := len(rec.Attempts); reason == "" && n > 0 {
		reason = rec.Attempts[n-1].Error
	}
	s.oldest.remove(m.Delivery)
	if s.cfg.Metric != nil {
		if status == StatusDelivered {
			s.cfg.Metric.WebhookDelivered()
		} else {
			s.cfg.Metric.WebhookFailed()
		}
	}
	if status == StatusFailed {
		s.cfg.Log.Warn().Str("delivery", m.Delivery).Str("reason", reason).Msg("webhook delivery failed for good")
	}
	_ = msg.Ack()
}

// published is when msg was stored (now when its metadata is unreadable).
func published(msg jetstream.Msg, now time.Time) time.Time {
	if md, err := msg.Metadata(); err == nil {
		return md.Timestamp
	}
	return now
}
