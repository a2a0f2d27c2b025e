// Package metrics defines the worker's Prometheus metrics. Every method is
// safe on a nil *Metrics, so components can run without metrics in tests.
package metrics

import (
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the worker's collectors and their registry.
type Metrics struct {
	reg           *prometheus.Registry
	jobs          *prometheus.CounterVec
	retries       *prometheus.CounterVec
	inflight      *prometheus.GaugeVec
	settled       *prometheus.CounterVec
	upstream      *prometheus.CounterVec
	pollBatch     prometheus.Histogram
	pollWatched   prometheus.Gauge
	artifactBytes *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	jsWaiting     *prometheus.GaugeVec
	jsFailures    *prometheus.CounterVec
	natsMoves     prometheus.Counter
}

// New registers the worker's metrics on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_jobs_total", Help: "Jobs finished, by kind and terminal status.",
		}, []string{"kind", "status"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_job_retries_total", Help: "Transient failures that redelivered a job, by kind.",
		}, []string{"kind"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_jobs_inflight", Help: "Jobs held by this worker, by kind.",
		}, []string{"kind"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_messages_settled_total", Help: "Job messages settled, by kind and action (ack, retry, release, dead_letter).",
		}, []string{"kind", "action"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_requests_total", Help: "Upstream HTTP requests, by API, endpoint and status (status 0: no response).",
		}, []string{"api", "endpoint", "status"}),
		pollBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sluice_poll_batch_size", Help: "Task ids per batch query to the media API.",
			Buckets: []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
		}),
		pollWatched: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_poll_tasks", Help: "Media tasks being polled.",
		}),
		artifactBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_artifact_bytes_total", Help: "Bytes copied into S3, by kind.",
		}, []string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_job_duration_seconds", Help: "Time from a job's last delivery to its terminal event, by kind and status.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12),
		}, []string{"kind", "status"}),
		jsWaiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_jetstream_waiting", Help: "1 while a loop of the worker waits for JetStream (pull <kind>, heartbeats, setup, state writes, event publishes), else 0.",
		}, []string{"loop"}),
		jsFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_jetstream_failures_total", Help: "Failed JetStream attempts, by loop and reason (no_responders, timeout, unavailable, leadership_change, leader_cut_off, disconnected, error).",
		}, []string{"loop", "reason"}),
		natsMoves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_nats_moves_total", Help: "Moves to another NATS server because no JetStream leader answered through the current one for SLUICE_NATS_MOVE_AFTER.",
		}),
	}
	m.reg.MustRegister(m.jobs, m.retries, m.inflight, m.settled, m.upstream, m.pollBatch, m.pollWatched,
		m.artifactBytes, m.duration, m.jsWaiting, m.jsFailures, m.natsMoves, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// JobFinished counts a terminal job and its duration.
func (m *Metrics) JobFinished(kind, status string, d time.Duration) {
	if m == nil {
		return
	}
	m.jobs.WithLabelValues(kind, status).Inc()
	m.duration.WithLabelValues(kind, status).Observe(d.Seconds())
}

// JobRetried counts a transient failure.
func (m *Metrics) JobRetried(kind string) {
	if m != nil {
		m.retries.WithLabelValues(kind).Inc()
	}
}

// Held moves the in-flight gauge of kind by delta.
func (m *Metrics) Held(kind string, delta int) {
	if m != nil {
		m.inflight.WithLabelValues(kind).Add(float64(delta))
	}
}

// Settled counts a settled message.
func (m *Metrics) Settled(kind, action string) {
	if m != nil {
		m.settled.WithLabelValues(kind, action).Inc()
	}
}

// PollBatch records one batch query of n task ids.
func (m *Metrics) PollBatch(n int) {
	if m != nil {
		m.pollBatch.Observe(float64(n))
	}
}

// PollWatched sets the number of media tasks being polled.
func (m *Metrics) PollWatched(n int) {
	if m != nil {
		m.pollWatched.Set(float64(n))
	}
}

// ArtifactBytes counts bytes copied into S3.
func (m *Metrics) ArtifactBytes(kind string, n int64) {
	if m != nil {
		m.artifactBytes.WithLabelValues(kind).Add(float64(n))
	}
}

// JetStreamWaiting shows whether loop waits for JetStream.
func (m *Metrics) JetStreamWaiting(loop string, waiting bool) {
	if m == nil {
		return
	}
	v := 0.0
	if waiting {
		v = 1
	}
	m.jsWaiting.WithLabelValues(loop).Set(v)
}

// JetStreamFailed counts a failed JetStream attempt of loop.
func (m *Metrics) JetStreamFailed(loop, reason string) {
	if m != nil {
		m.jsFailures.WithLabelValues(loop, reason).Inc()
	}
}

// NATSMoved counts a move to another NATS server.
func (m *Metrics) NATSMoved() {
	if m != nil {
		m.natsMoves.Inc()
	}
}

// idSegment matches path segments that are ids, so endpoints stay few.
var idSegment = regexp.MustCompile(`/(?:tasks|jobs|users)/[^/]+`)

// Transport counts every request of api sent through base by endpoint (the
// path with ids folded) and status.
func (m *Metrics) Transport(api string, base http.RoundTripper) http.RoundTripper {
	if m == nil {
		return base
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		endpoint := req.Method + " " + idSegment.ReplaceAllStringFunc(req.URL.Path, foldID)
		resp, err := base.RoundTrip(req)
		status := "0"
		if err == nil {
			status = strconv.Itoa(resp.StatusCode)
		}
		m.upstream.WithLabelValues(api, endpoint, status).Inc()
		return resp, err
	})
}

func foldID(s string) string {
	i := 1
	for i < len(s) && s[i] != '/' {
		i++
	}
	rest := s[i:]
	if len(rest) > 0 {
		return s[:i] + "/{id}"
	}
	return s
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
