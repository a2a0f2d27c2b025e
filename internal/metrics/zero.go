package metrics

// Known are the label values a worker knows before its first job: the
// kinds it serves, the terminal statuses and the settle actions.
type Known struct {
	Kinds    []string
	Statuses []string
	Actions  []string
}

// Zero creates the series of k's label values at 0, so that a dashboard
// panel of a healthy worker that has not yet finished, retried or held a
// job reads 0 rather than "No data". Labels whose values come from
// upstream (error codes, endpoints) are left to appear when seen.
func (m *Metrics) Zero(k Known) {
	if m == nil {
		return
	}
	for _, kind := range k.Kinds {
		for _, status := range k.Statuses {
			m.jobs.WithLabelValues(kind, status)
			m.duration.WithLabelValues(kind, status)
		}
		for _, action := range k.Actions {
			m.settled.WithLabelValues(kind, action)
		}
		m.retries.WithLabelValues(kind)
		m.inflight.WithLabelValues(kind)
		m.waiting.WithLabelValues(kind)
		m.artifactBytes.WithLabelValues(kind)
		m.orphaned.WithLabelValues(kind)
	}
	for _, final := range []string{"false", "true"} {
		m.notDeleted.WithLabelValues(final)
	}
	for _, outcome := range []string{"delivered", "failed", "retrying"} {
		m.webhooks.outcomes.WithLabelValues(outcome)
	}
}
