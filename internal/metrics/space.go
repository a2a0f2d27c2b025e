package metrics

import "github.com/prometheus/client_golang/prometheus"

// newSpaceGauge tells whether JetStream refuses this worker's writes for
// lack of space.
func newSpaceGauge() prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_jetstream_out_of_space",
		Help: "1 while JetStream refuses this worker's writes for lack of space (a stream, the account or the server at its limit; the worker takes no new job meanwhile), else 0.",
	})
}

// JetStreamOutOfSpace records whether JetStream refuses writes for lack of
// space.
func (m *Metrics) JetStreamOutOfSpace(full bool) {
	if m == nil {
		return
	}
	v := 0.0
	if full {
		v = 1
	}
	m.space.Set(v)
}
