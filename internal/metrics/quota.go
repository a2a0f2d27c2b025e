package metrics

import "github.com/prometheus/client_golang/prometheus"

// quotaGauges are the fleet quota gauges, by resource (media, compute).
type quotaGauges struct {
	limit, effective, inUse, held, waiting, waitingHere, rate *prometheus.GaugeVec
	// ops counts the worker's operations on the quota boards.
	ops *prometheus.CounterVec
}

func newQuotaGauges() quotaGauges {
	g := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"resource"})
	}
	return quotaGauges{
		limit:       g("sluice_quota_limit", "Fleet limit of upstream tasks in flight (SLUICE_FLEET_MEDIA_TASKS, SLUICE_FLEET_COMPUTE_JOBS), by resource; 0: none."),
		effective:   g("sluice_quota_effective_limit", "Fleet limit leases are granted by, by resource: the configured limit, or less while upstream answers concurrency conflicts."),
		inUse:       g("sluice_quota_in_use", "Leases held across the fleet (upstream tasks in flight), by resource, as this worker last read them."),
		held:        g("sluice_quota_held", "Leases held by this worker, by resource."),
		waiting:     g("sluice_quota_waiting_jobs", "Jobs held by the fleet's workers and waiting for a lease, by resource."),
		waitingHere: g("sluice_quota_waiting_jobs_here", "Jobs held by this worker and waiting for a lease, by resource."),
		rate:        g("sluice_quota_rate_limit", "Fleet limit of requests per second (SLUICE_FLEET_MEDIA_RATE, SLUICE_FLEET_COMPUTE_RATE), by resource; 0: none."),
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_quota_board_ops_total",
			Help: "This worker's operations on the fleet quota bucket, by key (leases.<resource>, rate.<resource>; alive for the requests asking other holders whether they live), op (read, write: a compare-and-set; ping) and outcome (ok, absent, conflict: another writer was first, lost: no answer, silent: no responders, error).",
		}, []string{"key", "op", "outcome"}),
	}
}

func (q quotaGauges) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.limit, q.effective, q.inUse, q.held, q.waiting, q.waitingHere, q.rate, q.ops}
}

// Quota records one resource's fleet quota as this worker sees it.
func (m *Metrics) Quota(resource string, limit, effective, inUse, held, waiting, waitingHere int) {
	if m == nil {
		return
	}
	m.quota.limit.WithLabelValues(resource).Set(float64(limit))
	m.quota.effective.WithLabelValues(resource).Set(float64(effective))
	m.quota.inUse.WithLabelValues(resource).Set(float64(inUse))
	m.quota.held.WithLabelValues(resource).Set(float64(held))
	m.quota.waiting.WithLabelValues(resource).Set(float64(waiting))
	m.quota.waitingHere.WithLabelValues(resource).Set(float64(waitingHere))
}

// QuotaRate records one resource's fleet request rate limit.
func (m *Metrics) QuotaRate(resource string, perSecond float64) {
	if m != nil {
		m.quota.rate.WithLabelValues(resource).Set(perSecond)
	}
}

// QuotaBoardOp counts one operation on the fleet quota bucket (see
// sluice_quota_board_ops_total).
func (m *Metrics) QuotaBoardOp(key, op, outcome string) {
	if m != nil {
		m.quota.ops.WithLabelValues(key, op, outcome).Inc()
	}
}
