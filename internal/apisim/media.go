// Package apisim simulates sluice's upstream HTTP APIs for tests and for
// the embedded development setup: each simulator is an http.Handler that
// speaks the documented wire format, validates requests by the documented
// rules, moves tasks through their states on an injected clock, and can be
// told to misbehave (Faults) while counting what it saw (Counters).
package apisim

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/artifacts"
)

// Endpoint names of the media simulator, for Faults.Set and the
// "requests:<endpoint>:<status>" counters.
const (
	EndpointVideoSubmit  = "video.submit"
	EndpointSpeechSubmit = "speech.submit"
	EndpointTask         = "task.get"
	EndpointTasks        = "task.batch"
	EndpointCancel       = "task.cancel"
	EndpointResult       = "result.get"
)

// MediaConfig configures the media API simulator. Fields are in a stable
// order.
type MediaConfig struct {
	// APIKey is the bearer key every API call must carry; result downloads
	// need none. Empty accepts any non-empty bearer key. Defaults to "".
	APIKey string
	// TaskDuration is how long an asynchronous task takes from submit to
	// its terminal status. Defaults to 2s.
	TaskDuration time.Duration
	// PendingFor is how long a task stays pending before running (capped
	// at TaskDuration). Defaults to a quarter of TaskDuration.
	PendingFor time.Duration
	// FailureRate is the probability in [0, 1] that a task (or stream)
	// fails. Defaults to 0.
	FailureRate float64
	// ResultSize is the size in bytes of each result file and of a
	// stream's audio. Defaults to 1 MiB.
	ResultSize int64
	// ResultBaseURL is the scheme://host[:port] that result URLs start
	// with. Defaults to "", which builds them from the request's Host (and
	// TLS state).
	ResultBaseURL string
	// SkipInputChecks accepts video media inputs without fetching them.
	// Defaults to false: every input is fetched and checked against the
	// input media limits at submit, as upstream does.
	SkipInputChecks bool
	// ConcurrencyLimit, when above zero, is the account's limit of tasks
	// pending or running at once: a submit past it is answered 433 with
	// code 10007 (platform-evidence.md section 6) and creates nothing.
	// Defaults to 0, no limit: the platform's number is not known, and
	// tests and benchmarks hold thousands of tasks at once.
	ConcurrencyLimit int
	// Now reads the clock that moves tasks along. Defaults to time.Now.
	Now func() time.Time
	// Letter makes the simulator follow media-api.md to the letter where
	// the platform differs from it (spec/platform-evidence.md section 6):
	// video resolutions 768P and 2K only, and no concurrency limit (the
	// document names none). Defaults to false: like the platform, the
	// models public clients use also take 720p and 1080p.
	Letter bool
	// StateFile, when set, is where the simulator keeps its tasks (and
	// the submit counts), rewritten after each submit and cancel and read
	// back by NewMedia, so that a restarted simulator still answers for
	// them. Defaults to "", memory only.
	StateFile string
}

func (c MediaConfig) withDefaults() MediaConfig {
	c.TaskDuration = cmp.Or(c.TaskDuration, 2*time.Second)
	c.PendingFor = cmp.Or(c.PendingFor, c.TaskDuration/4)
	c.PendingFor = min(c.PendingFor, c.TaskDuration)
	c.FailureRate = min(max(c.FailureRate, 0), 1)
	c.ResultSize = cmp.Or(c.ResultSize, 1<<20)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Media simulates the media API (spec/media-api.md) under /api/llm/v1/ and
// serves result files under /sim/results/<task_id>/<n>.<ext>. It is an
// http.Handler, safe for concurrent use. Task state is computed lazily from
// the clock, so idle tasks cost only their record.
//
// Directives in a video prompt or speech text change one task:
//
//	[sim:fail]             the task (or stream) fails, error_code "sim_failure"
//	[sim:fail=CODE]        the same with error_code CODE
//	[sim:ok]               the task succeeds even under FailureRate
//	[sim:duration=2s]      submit to terminal status takes 2s
//	[sim:pending=500ms]    pending for 500ms, then running
//	[sim:size=1048576]     each result (or a stream's audio) has this many bytes
//	[sim:count=2]          the task has 2 results (1..10; default 1)
//	[sim:result-url=URL]   every result address is URL, verbatim
//	[sim:result-cut]       downloads send half the bytes, then break
//	[sim:format=wav]       speech results are WAV (default MP3)
//	[sim:frames=8]         a stream sends 8 audio frames (default 4)
//	[sim:sse-cut]          a stream ends cleanly after half its frames,
//	                       without the final frame
//	[sim:sse-abort]        a stream breaks (connection reset) after half
//	                       its frames
//	[sim:show-running]     the first query that would see the task ended
//	                       sees it running instead, unless one did already
//	[sim:no-task-id]       a synchronous speech answer has no output.task_id
//	[sim:bad-element]      the task's element of a batch query answer is
//	                       malformed (task_status a number)
//	[sim:cancel-running]   the first cancel answers the task's status
//	                       (running or pending) and does not cancel it
//	[sim:sse-stall]        a stream sends half its frames, then nothing,
//	                       holding the connection open
//	[sim:frame-gap=400ms]  a stream pauses this long before each frame
//	                       after the first
//
// A directive with a bad value is a 400 invalid_parameter on the prompt or
// text.
type Media struct {
	cfg      MediaConfig
	fetcher  *artifacts.Fetcher
	faults   Faults
	counters Counters
	mux      *http.ServeMux
	prefix   string // random per instance, keeps ids unique across restarts
	seq      atomic.Int64

	loadErr error

	mu      sync.Mutex
	tasks   map[string]*simTask
	submits map[string]int64
}

// NewMedia returns a media API simulator.
func NewMedia(cfg MediaConfig) *Media {
	var b [4]byte
	_, _ = rand.Read(b[:])
	m := &Media{
		cfg:     cfg.withDefaults(),
		fetcher: artifacts.NewFetcher(artifacts.FetcherConfig{AllowPrivate: true, Timeout: inputTimeout}),
		prefix:  hex.EncodeToString(b[:]),
		tasks:   make(map[string]*simTask),
		submits: make(map[string]int64),
	}
	m.loadErr = m.load()
	mux := http.NewServeMux()
	m.handle(mux, "POST /api/llm/v1/videos/generations", EndpointVideoSubmit, m.submitVideo)
	m.handle(mux, "POST /api/llm/v1/audios/generations", EndpointSpeechSubmit, m.submitSpeech)
	m.handle(mux, "GET /api/llm/v1/tasks/{task_id}", EndpointTask, m.getTask)
	m.handle(mux, "POST /api/llm/v1/tasks", EndpointTasks, m.getTasks)
	m.handle(mux, "POST /api/llm/v1/tasks/{task_id}/cancel", EndpointCancel, m.cancelTask)
	m.handle(mux, "GET /sim/results/{task_id}/{file}", EndpointResult, m.getResult)
	mux.HandleFunc("/", m.counters.countRequests("unknown", func(w http.ResponseWriter, r *http.Request) {
		m.writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "", "no such endpoint: "+r.Method+" "+r.URL.Path)
	}))
	m.mux = mux
	return m
}

// StateErr returns the error that reading cfg.StateFile met in NewMedia
// (nil when there was none or it was read); the simulator then started
// without the saved tasks.
func (m *Media) StateErr() error { return m.loadErr }

// ServeHTTP serves the media API and the result files.
func (m *Media) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.mux.ServeHTTP(w, r) }

// Faults returns the simulator's fault settings (endpoint names are the
// Endpoint* constants).
func (m *Media) Faults() *Faults { return &m.faults }

// Counters returns what the simulator counted: "requests:<endpoint>:<status>"
// per answered request, "submits:<prompt-or-text>" per accepted paid
// submission, and "tasks:<status>" per task that reached a status (a task
// that went pending, running, succeeded counts once in each, as observed by
// a later request).
func (m *Media) Counters() *Counters { return &m.counters }

// SubmitCount returns how many submissions with exactly this video prompt
// or speech text passed validation (a task or stream was started for each):
// more than one means upstream was paid twice.
func (m *Media) SubmitCount(promptOrText string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.submits[promptOrText]
}

// handle registers h under pattern with the endpoint's faults and request
// counter around it.
func (m *Media) handle(mux *http.ServeMux, pattern, endpoint string, h http.HandlerFunc) {
	mux.HandleFunc(pattern, m.counters.countRequests(endpoint, m.faults.Wrap(endpoint, m.writeFaultError, h)))
}

func (m *Media) nextID(kind string) string {
	return fmt.Sprintf("%s-%s-%06d", kind, m.prefix, m.seq.Add(1))
}

// errorJSON is the documented error shape (media-api section 7).
type errorJSON struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// writeError answers status with the documented error shape; an empty
// param is sent as null.
func (m *Media) writeError(w http.ResponseWriter, status int, typ, code, param, msg string) {
	var e errorJSON
	e.Error.Message, e.Error.Type, e.Error.Code = msg, typ, code
	if param != "" {
		e.Error.Param = &param
	}
	e.RequestID = m.nextID("req")
	writeJSON(w, status, e)
}

// QuotaExhaustedMessage is the message of the simulator's 433 answer.
const QuotaExhaustedMessage = "simulated quota exhausted: one run per model per day"

// writeFaultError is the error body of an injected 429 or 5xx.
func (m *Media) writeFaultError(w http.ResponseWriter, status int) {
	typ, code := "server_error", "internal_error"
	switch status {
	case http.StatusTooManyRequests:
		typ, code = "rate_limit_error", "rate_limit_exceeded"
	case http.StatusServiceUnavailable:
		code = "service_unavailable"
	case StatusQuotaExhausted:
		m.writeError(w, status, "invalid_request_error", "quota_exhausted", "", QuotaExhaustedMessage)
		return
	}
	m.writeError(w, status, typ, code, "", "simulated "+http.StatusText(status))
}

// writeParamError answers 400 invalid_parameter naming the field.
func (m *Media) writeParamError(w http.ResponseWriter, param, msg string) {
	m.writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_parameter", param, msg)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "apisim: cannot encode answer", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// statusWriter records the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
	w.ResponseWriter.WriteHeader(s)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes a stream's flush through when the writer supports it.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
