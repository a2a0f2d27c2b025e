package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// newAPICounter counts the HTTP API's requests.
func newAPICounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_api_requests_total",
		Help: "HTTP API requests, by route, response status and key id (\"none\" when no valid key was given).",
	}, []string{"route", "status", "key"})
}

// APIRequest counts one HTTP API request answered with status on route
// (the route's pattern, not the path) with key (a key's id, never the key).
func (m *Metrics) APIRequest(route string, status int, key string) {
	if m != nil {
		m.api.WithLabelValues(route, strconv.Itoa(status), key).Inc()
	}
}
