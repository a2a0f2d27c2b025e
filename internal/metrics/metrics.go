// Package metrics defines the worker's Prometheus metrics. Every method is
// safe on a nil *Metrics, so components can run without metrics in tests.
package metrics

import (
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds the worker's collectors and their registry.
type Metrics struct {
	reg     *prometheus.Registry
	jobs    *prometheus.CounterVec
	retries *prometheus.CounterVec
	// notDeleted counts failed deletions of container instances.
	notDeleted *prometheus.CounterVec
	// leftovers counts what unrecorded creates or submits made upstream
	// and sluice deleted or cancelled.
	leftovers     *prometheus.CounterVec
	inflight      *prometheus.GaugeVec
	stuck         *prometheus.GaugeVec
	settled       *prometheus.CounterVec
	upstream      *prometheus.CounterVec
	upstreamTime  *prometheus.HistogramVec
	spansDropped  *prometheus.CounterVec
	pollBatch     prometheus.Histogram
	pollWatched   prometheus.Gauge
	artifactBytes *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	jsWaiting     *prometheus.GaugeVec
	jsFailures    *prometheus.CounterVec
	natsMoves     prometheus.Counter
	failures      *prometheus.CounterVec
	waiting       *prometheus.GaugeVec
	waitingClass  *prometheus.GaugeVec
	orphaned      *prometheus.CounterVec
	quota         quotaGauges
	store         storeGauges
	space         prometheus.Gauge
	tokens        *prometheus.CounterVec
	api           *prometheus.CounterVec
	webhooks      webhookCollectors

	// codes are the error codes seen as label values so far (see
	// JobFinished).
	codesMu sync.Mutex
	codes   map[string]bool
}

// maxCodes bounds the distinct error codes used as label values: upstream
// chooses its own codes, and a metric must not grow without bound.
const maxCodes = 100

// CodeOther replaces an error code that is not a plain identifier or comes
// after maxCodes others.
const CodeOther = "other"

// plainCode is what an error code must look like to be a label value.
var plainCode = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

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
		notDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_container_delete_failures_total",
			Help: "Deletions of a container instance that failed (the instance is still billed); final=true when the job ended without deleting it.",
		}, []string{"final"}),
		leftovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_leftovers_total",
			Help: "Container instances and compute jobs an unrecorded create or submit made (a lost or late answer) that sluice deleted or cancelled (result=deleted) or could not (result=failed).",
		}, []string{"kind", "result"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_jobs_inflight", Help: "Jobs held by this worker, by kind.",
		}, []string{"kind"}),
		stuck: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_jobs_stuck", Help: "Jobs held by this worker that stay in one step longer than the step's bound (SLUICE_STUCK_FACTOR times its deadline), by step.",
		}, []string{"step"}),
		settled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_messages_settled_total", Help: "Job messages settled, by kind and action (ack, retry, release, dead_letter).",
		}, []string{"kind", "action"}),
		upstream: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_upstream_requests_total", Help: "Upstream HTTP requests, by API, endpoint and status (status 0: no response).",
		}, []string{"api", "endpoint", "status"}),
		upstreamTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_upstream_request_duration_seconds", Help: "Time from sending an upstream HTTP request to its response headers (or its failure), by API and endpoint.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"api", "endpoint"}),
		spansDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_trace_spans_dropped_total", Help: "Trace spans not exported, by reason (queue_full: OTEL_BSP_MAX_QUEUE_SIZE spans were waiting; export_failed: the OTLP endpoint did not take them).",
		}, []string{"reason"}),
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
			Name: "sluice_jetstream_waiting", Help: "1 while a loop of the worker waits for JetStream (pull <kind>, heartbeats, sweep, setup, state writes, event publishes), else 0.",
		}, []string{"loop"}),
		jsFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_jetstream_failures_total", Help: "Failed JetStream attempts, by loop and reason (no_responders, timeout, unavailable, leadership_change, leader_cut_off, no_leader, disconnected, no_space, error).",
		}, []string{"loop", "reason"}),
		natsMoves: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_nats_moves_total", Help: "Moves to another NATS server because no JetStream leader answered through the current one for SLUICE_NATS_MOVE_AFTER.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_job_failures_total", Help: "Jobs that ended failed, by kind, error code and stage.",
		}, []string{"kind", "code", "stage"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sluice_jobs_waiting", Help: "Job messages in SLUICE_JOBS, by kind: queued, held by a worker or waiting for a retry (the same for every worker).",
		}, []string{"kind"}),
		orphaned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_messages_orphaned_total", Help: "Job messages found in SLUICE_JOBS at or below their consumer's ack floor (which no consumer delivers again) and handed over by this worker's sweep, by kind.",
		}, []string{"kind"}),
		waitingClass: newClassGauge(),
		quota:        newQuotaGauges(),
		store:        newStoreGauges(),
		space:        newSpaceGauge(),
		tokens:       newTokenCounter(),
		api:          newAPICounter(),
		webhooks:     newWebhookCollectors(),
		codes:        make(map[string]bool),
	}
	m.reg.MustRegister(m.jobs, m.retries, m.notDeleted, m.leftovers, m.inflight, m.stuck, m.settled, m.upstream, m.upstreamTime, m.spansDropped, m.pollBatch, m.pollWatched,
		m.artifactBytes, m.duration, m.failures, m.waiting, m.waitingClass, m.orphaned, m.jsWaiting, m.jsFailures, m.natsMoves,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.quota.collectors()...)
	m.reg.MustRegister(m.store.collectors()...)
	m.reg.MustRegister(m.space, m.tokens, m.api)
	m.reg.MustRegister(m.webhooks.collectors()...)
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

// JobFailed counts a job that ended failed with code at stage. A code
// that is not a plain identifier, or that comes after 100 distinct others,
// is counted as CodeOther.
func (m *Metrics) JobFailed(kind, code, stage string) {
	if m == nil {
		return
	}
	m.failures.WithLabelValues(kind, m.codeLabel(code), stage).Inc()
}

func (m *Metrics) codeLabel(code string) string {
	if !plainCode.MatchString(code) {
		return CodeOther
	}
	m.codesMu.Lock()
	defer m.codesMu.Unlock()
	if !m.codes[code] {
		if len(m.codes) >= maxCodes {
			return CodeOther
		}
		m.codes[code] = true
	}
	return code
}

// Waiting sets the number of job messages of kind in SLUICE_JOBS.
func (m *Metrics) Waiting(kind string, n int) {
	if m != nil {
		m.waiting.WithLabelValues(kind).Set(float64(n))
	}
}

// Orphaned counts a job message of kind that the sweep handed over because
// its consumer will not deliver it again.
func (m *Metrics) Orphaned(kind string) {
	if m != nil {
		m.orphaned.WithLabelValues(kind).Inc()
	}
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

// Stuck sets the number of stuck jobs at step (internal/watchdog).
func (m *Metrics) Stuck(step string, n int) {
	if m != nil {
		m.stuck.WithLabelValues(step).Set(float64(n))
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

// Transport counts every request of api sent through base by endpoint and
// status (0: no response), and observes its latency by endpoint. route names the endpoint of a request from its
// method and escaped path; it must return a bounded set of values, route
// templates such as "GET /jobs/{job_id}", never a path with ids in it.
func (m *Metrics) Transport(api string, route func(method, path string) string, base http.RoundTripper) http.RoundTripper {
	if m == nil {
		return base
	}
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		endpoint := route(req.Method, req.URL.EscapedPath())
		start := time.Now()
		resp, err := base.RoundTrip(req)
		m.upstreamTime.WithLabelValues(api, endpoint).Observe(time.Since(start).Seconds())
		status := "0"
		if err == nil {
			status = strconv.Itoa(resp.StatusCode)
		}
		m.upstream.WithLabelValues(api, endpoint, status).Inc()
		return resp, err
	})
}

// SpansDropped counts n trace spans not exported for reason.
func (m *Metrics) SpansDropped(reason string, n int) {
	if m != nil {
		m.spansDropped.WithLabelValues(reason).Add(float64(n))
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Leftovers counts n upstream resources of kind that an unrecorded create
// or submit made, deleted (or cancelled) when deleted, else not.
func (m *Metrics) Leftovers(kind string, n int, deleted bool) {
	if m != nil {
		result := "failed"
		if deleted {
			result = "deleted"
		}
		m.leftovers.WithLabelValues(kind, result).Add(float64(n))
	}
}

// ContainerNotDeleted counts a failed deletion of a container instance;
// final when its job ended without the instance deleted (docs/operating.md,
// "A container instance that could not be deleted").
func (m *Metrics) ContainerNotDeleted(final bool) {
	if m != nil {
		m.notDeleted.WithLabelValues(strconv.FormatBool(final)).Inc()
	}
}
