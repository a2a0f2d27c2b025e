package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

func newClassGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_jobs_waiting_class",
		Help: "Job messages in each class queue of SLUICE_JOBS (fair scheduling on), by kind, tenant and priority: admitted, held by a worker or waiting for a retry (the same for every worker).",
	}, []string{"kind", "tenant", "priority"})
}

// WaitingClass sets the number of job messages in the class queue of kind,
// tenant and priority; 0 removes the series, so that tenants gone leave
// none behind.
func (m *Metrics) WaitingClass(kind, tenant string, priority, n int) {
	if m == nil {
		return
	}
	p := strconv.Itoa(priority)
	if n == 0 {
		m.waitingClass.DeleteLabelValues(kind, tenant, p)
		return
	}
	m.waitingClass.WithLabelValues(kind, tenant, p).Set(float64(n))
}
