package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// webhookCollectors count webhook deliveries (docs/webhooks.md).
type webhookCollectors struct {
	outcomes *prometheus.CounterVec
	oldest   prometheus.Gauge
}

func newWebhookCollectors() webhookCollectors {
	return webhookCollectors{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_webhook_deliveries_total",
			Help: "Webhook deliveries settled or retried by this worker, by outcome: delivered (2xx), failed (for good: 410, schedule exhausted, refused destination) or retrying (an attempt failed, another follows).",
		}, []string{"outcome"}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_webhook_oldest_pending_seconds",
			Help: "Age of the oldest webhook delivery this worker has seen and not yet settled (0: none).",
		}),
	}
}

func (w webhookCollectors) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.outcomes, w.oldest}
}

// WebhookDelivered counts a delivery a receiver answered 2xx.
func (m *Metrics) WebhookDelivered() { m.webhookOutcome("delivered") }

// WebhookFailed counts a delivery that failed for good.
func (m *Metrics) WebhookFailed() { m.webhookOutcome("failed") }

// WebhookRetrying counts a failed attempt that another follows.
func (m *Metrics) WebhookRetrying() { m.webhookOutcome("retrying") }

func (m *Metrics) webhookOutcome(outcome string) {
	if m != nil {
		m.webhooks.outcomes.WithLabelValues(outcome).Inc()
	}
}

// WebhookOldestPending sets the age of the oldest pending delivery.
func (m *Metrics) WebhookOldestPending(age time.Duration) {
	if m != nil {
		m.webhooks.oldest.Set(age.Seconds())
	}
}
