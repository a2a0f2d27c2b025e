package metrics

import "github.com/prometheus/client_golang/prometheus"

// storeGauges tell whether the artifact store answers this worker's
// probes.
type storeGauges struct {
	waiting  prometheus.Gauge
	failures prometheus.Counter
}

func newStoreGauges() storeGauges {
	return storeGauges{
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_s3_waiting", Help: "1 while the artifact store does not answer this worker's probes (the worker takes no new job meanwhile), else 0.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_s3_probe_failures_total", Help: "Failed probes of the artifact store (its bucket checked with the worker's credentials).",
		}),
	}
}

func (s storeGauges) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.waiting, s.failures}
}

// StoreWaiting records whether the artifact store is away.
func (m *Metrics) StoreWaiting(waiting bool) {
	if m == nil {
		return
	}
	v := 0.0
	if waiting {
		v = 1
	}
	m.store.waiting.Set(v)
}

// StoreProbeFailed counts a failed probe of the artifact store.
func (m *Metrics) StoreProbeFailed() {
	if m == nil {
		return
	}
	m.store.failures.Inc()
}
