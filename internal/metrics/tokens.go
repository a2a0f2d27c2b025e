package metrics

import "github.com/prometheus/client_golang/prometheus"

// newTokenCounter counts the compute tokens the worker obtained, by how.
func newTokenCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_compute_tokens_total",
		Help: "Compute platform tokens obtained, by how: login (a token call) or renewal (tokens/next ahead of expiry).",
	}, []string{"how"})
}

// ComputeToken counts a compute token obtained by how ("login",
// "renewal").
func (m *Metrics) ComputeToken(how string) {
	if m != nil {
		m.tokens.WithLabelValues(how).Inc()
	}
}
