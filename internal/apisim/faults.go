package apisim

import (
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Fault describes what the simulator does wrong on one endpoint. Rates are
// probabilities in [0, 1] drawn independently per request; the zero Fault
// injects nothing.
type Fault struct {
	// Error5xxRate answers 500 or 503 (alternating at random) before the
	// handler runs.
	Error5xxRate float64
	// Error500AfterRate runs the handler (so its effect, e.g. a created
	// task, happens) and then answers 500: the "ambiguous" failure.
	Error500AfterRate float64
	// Error429Rate answers 429 with Retry-After before the handler runs.
	Error429Rate float64
	// Error433Rate answers 433, the media API's exhausted quota, before
	// the handler runs: nothing is created.
	Error433Rate float64
	// ConcurrencyRate answers 433 with code 10007, the media API's "too
	// many tasks at once", before the handler runs: nothing is created.
	ConcurrencyRate float64
	// RetryAfter is the Retry-After value sent with 429 and 503. Defaults
	// to 1s.
	RetryAfter time.Duration
	// Latency delays every request by this much.
	Latency time.Duration
	// HangRate holds the request open until the client goes away.
	HangRate float64
	// TruncateRate cuts the response body in half (the handler's effect
	// happens).
	TruncateRate float64
	// MalformedRate replaces the response body with invalid JSON (the
	// handler's effect happens).
	MalformedRate float64
	// NoRouteRate answers HTTP 404 with a plain-text body, as a gateway
	// without the route does, before the handler runs.
	NoRouteRate float64
	// Times, when above zero, applies the fault to that many requests
	// only (counted as they arrive), then clears it: a test can hold one
	// request without racing the next.
	Times int
}

// StatusQuotaExhausted is the media API's answer to a submit over the
// account's quota (platform-evidence.md section 6).
const StatusQuotaExhausted = 433

// ConcurrencyConflictCode and ConcurrencyConflictMessage are the code and
// message of the media API's 433 answer to a submit over the account's
// concurrency limit (platform-evidence.md section 6).
const (
	ConcurrencyConflictCode    = "10007"
	ConcurrencyConflictMessage = "Concurrency conflict for request"
)

// writeConcurrencyConflict answers a submit over the account's concurrency
// limit as the platform does: HTTP 433 and its own envelope, not the
// documented error object.
func writeConcurrencyConflict(w http.ResponseWriter) {
	writeEnvelopeError(w, StatusQuotaExhausted, ConcurrencyConflictCode, ConcurrencyConflictMessage)
}

// Faults holds the Fault of each endpoint. Endpoint names are the
// simulator's own (see the Endpoint* constants of each API). Safe for
// concurrent use.
type Faults struct {
	mu sync.Mutex
	m  map[string]Fault
}

// Set replaces the fault of endpoint; the zero Fault clears it. The endpoint
// "*" applies to every endpoint without a fault of its own.
func (f *Faults) Set(endpoint string, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string]Fault)
	}
	f.m[endpoint] = fault
}

// Reset clears every fault.
func (f *Faults) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m = nil
}

// take returns the fault of a request to endpoint, counting it against
// the fault's Times.
func (f *Faults) take(endpoint string) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := endpoint
	ft, ok := f.m[key]
	if !ok {
		key = "*"
		ft = f.m[key]
	}
	switch {
	case ft.Times == 1:
		delete(f.m, key)
	case ft.Times > 1:
		left := ft
		left.Times--
		f.m[key] = left
	}
	return ft
}

func hit(rate float64) bool { return rate > 0 && rand.Float64() < rate }

// Wrap returns next with endpoint's faults applied. errBody writes the
// API's own error shape for an injected status.
func (f *Faults) Wrap(endpoint string, errBody func(w http.ResponseWriter, status int), next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ft := f.take(endpoint)
		if ft.Latency > 0 {
			select {
			case <-time.After(ft.Latency):
			case <-r.Context().Done():
				return
			}
		}
		if hit(ft.HangRate) {
			// Consume the body first: net/http notices that the client went
			// away (and cancels r.Context()) only once the body is read;
			// otherwise a hung POST never returns and blocks server Close.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		if hit(ft.NoRouteRate) {
			http.NotFound(w, r)
			return
		}
		retryAfter := strconv.Itoa(int(max(ft.RetryAfter, time.Second) / time.Second))
		if hit(ft.Error429Rate) {
			w.Header().Set("Retry-After", retryAfter)
			errBody(w, http.StatusTooManyRequests)
			return
		}
		if hit(ft.Error433Rate) {
			errBody(w, StatusQuotaExhausted)
			return
		}
		if hit(ft.ConcurrencyRate) {
			writeConcurrencyConflict(w)
			return
		}
		if hit(ft.Error5xxRate) {
			status := http.StatusInternalServerError
			if rand.IntN(2) == 0 {
				status = http.StatusServiceUnavailable
				w.Header().Set("Retry-After", retryAfter)
			}
			errBody(w, status)
			return
		}
		after, trunc, bad := hit(ft.Error500AfterRate), hit(ft.TruncateRate), hit(ft.MalformedRate)
		if !after && !trunc && !bad {
			next(w, r)
			return
		}
		rec := &recorder{header: make(http.Header)}
		next(rec, r)
		switch {
		case after:
			errBody(w, http.StatusInternalServerError)
		case bad:
			copyHeader(w.Header(), rec.header)
			w.WriteHeader(rec.statusOr200())
			_, _ = w.Write([]byte(`{"output": [1, 2,, "not json`))
		default: // truncated
			copyHeader(w.Header(), rec.header)
			w.Header().Del("Content-Length")
			w.WriteHeader(rec.statusOr200())
			_, _ = w.Write(rec.body[:len(rec.body)/2])
		}
	}
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		dst[k] = v
	}
}

// recorder buffers a handler's small JSON response so a fault can rewrite
// it. It is never used for file downloads that have no fault configured.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.body = append(r.body, b...)
	return len(b), nil
}
func (r *recorder) statusOr200() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}
