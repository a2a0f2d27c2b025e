// Package httpapi is sluice's HTTP API (docs/http-api.md): producers that
// do not speak NATS submit, read, list, cancel and retry jobs and follow
// their events over HTTP with a key of one tenant. The handlers are thin
// shells over jobclient, the same calls the enqueue CLI and the console
// make, and the API's exact shape is the OpenAPI document beside them
// (openapi.json, served at /v1/openapi.json).
package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/models"
)

// Presigner signs a GET URL of an object that expires after ttl.
type Presigner interface {
	Presign(ctx context.Context, bucket, key string, ttl time.Duration) (string, error)
}

// Config holds what a Server needs.
type Config struct {
	// Client reads and publishes jobs. Required.
	Client *jobclient.Client
	// Keys authenticates requests and records job owners. Required.
	Keys *apikeys.Store
	// Catalog checks video specs, as the CLI and the worker do. Defaults
	// to the shipped catalog.
	Catalog *models.Catalog
	// Presigner signs artifact links. Defaults to none: artifacts are
	// listed without download_url.
	Presigner Presigner
	// PresignTTL is how long an artifact link is valid. Defaults to 1h.
	PresignTTL time.Duration
	// NewID makes the id of a spec without one. Defaults to
	// jobclient.NewID on the clock and crypto/rand.
	NewID jobclient.IDFunc
	// Metrics counts requests. Defaults to none.
	Metrics *metrics.Metrics
	// Logger logs one line per request. Defaults to none.
	Logger *zerolog.Logger
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// KeepAlive is how often an idle event stream gets a comment, so
	// that proxies do not close it. Defaults to 15s.
	KeepAlive time.Duration
}

func (c Config) withDefaults() Config {
	if c.Catalog == nil {
		c.Catalog = models.Shipped()
	}
	c.PresignTTL = cmp.Or(c.PresignTTL, time.Hour)
	c.KeepAlive = cmp.Or(c.KeepAlive, 15*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		now := c.Now
		c.NewID = func(kind string) (string, error) { return jobclient.NewID(kind, now(), rand.Reader) }
	}
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("httpapi: Client is required")
	case c.Keys == nil:
		return errors.New("httpapi: Keys is required")
	case c.PresignTTL < 0 || c.PresignTTL > 7*24*time.Hour:
		return fmt.Errorf("httpapi: PresignTTL must be in [0, 168h], got %s", c.PresignTTL)
	}
	return nil
}

// Server is the HTTP API's handler.
type Server struct {
	cfg Config
	mux *http.ServeMux
	// limits holds each rate-limited key's token bucket. The limit is per
	// worker: a fleet of N workers behind one address lets a key make up
	// to N times its rate.
	limits sync.Map // key id -> *rate.Limiter
	params paramChecks
}

// New returns the API's handler.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	params, err := newParamChecks()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), params: params}
	s.mux.HandleFunc("GET /v1/openapi.json", serveDocument)
	s.mux.HandleFunc("GET /{$}", serveTryPage)
	s.handle("POST /v1/jobs", s.submit)
	s.handle("GET /v1/jobs", s.list)
	s.handle("GET /v1/jobs/{id}", s.get)
	s.handle("POST /v1/jobs/{id}/cancel", s.cancel)
	s.handle("POST /v1/jobs/{id}/retry", s.retry)
	s.handle("GET /v1/jobs/{id}/events", s.events)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, problem{Status: http.StatusNotFound, Code: codeNotFound, Detail: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	return s, nil
}

// ServeHTTP logs and counts every request, naming its key's id only.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := s.cfg.Now()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK, key: "none"}
	s.mux.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), recorderKey{}, rec)))
	_, route := s.mux.Handler(r)
	s.cfg.Metrics.APIRequest(cmp.Or(route, "other"), rec.status, rec.key)
	s.cfg.Logger.Info().Str("method", r.Method).Str("route", route).Str("path", r.URL.Path).
		Int("status", rec.status).Str("key_id", rec.key).Dur("took", s.cfg.Now().Sub(start)).Msg("api request")
}

// authedHandler is a handler that acts for one key.
type authedHandler func(w http.ResponseWriter, r *http.Request, key *apikeys.Key)

// handle routes pattern to h behind the key check and the key's rate.
func (s *Server) handle(pattern string, h authedHandler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		key, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		if !s.allow(w, r, key) {
			return
		}
		if msg := s.params.check(r); msg != "" {
			writeProblem(w, r, problem{Status: http.StatusBadRequest, Code: codeBadParameter, Detail: msg})
			return
		}
		h(w, r, key)
	})
}

// authenticate answers 401 unless the request carries a valid key, and
// 503 when the keys cannot be read.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (*apikeys.Key, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
		writeProblem(w, r, problem{Status: http.StatusUnauthorized, Code: codeUnauthorized, Detail: "an Authorization: Bearer <key> header is required"})
		return nil, false
	}
	key, err := s.cfg.Keys.Authenticate(r.Context(), strings.TrimSpace(token))
	if errors.Is(err, apikeys.ErrUnauthorized) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sluice", error="invalid_token"`)
		writeProblem(w, r, problem{Status: http.StatusUnauthorized, Code: codeUnauthorized, Detail: err.Error()})
		return nil, false
	}
	if err != nil {
		s.unavailable(w, r, err)
		return nil, false
	}
	if rec, ok := r.Context().Value(recorderKey{}).(*recorder); ok {
		rec.key = key.ID
	}
	return key, true
}

// allow answers 429 with Retry-After when key is over its rate.
func (s *Server) allow(w http.ResponseWriter, r *http.Request, key *apikeys.Key) bool {
	if key.Rate <= 0 {
		return true
	}
	v, _ := s.limits.LoadOrStore(key.ID, rate.NewLimiter(rate.Limit(key.Rate), max(1, int(key.Rate))))
	lim := v.(*rate.Limiter)
	if lim.Limit() != rate.Limit(key.Rate) {
		lim.SetLimit(rate.Limit(key.Rate))
	}
	res := lim.ReserveN(s.cfg.Now(), 1)
	delay := res.DelayFrom(s.cfg.Now())
	if delay == 0 {
		return true
	}
	res.CancelAt(s.cfg.Now())
	secs := int(delay/time.Second) + 1
	w.Header().Set("Retry-After", fmt.Sprint(secs))
	writeProblem(w, r, problem{Status: http.StatusTooManyRequests, Code: codeRateLimited,
		Detail: fmt.Sprintf("key %s is over its rate of %g requests per second; retry after %d s", key.ID, key.Rate, secs)})
	return false
}

// unavailable answers 503 for an error of NATS or the store: the request
// may be repeated.
func (s *Server) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	s.cfg.Logger.Warn().Err(err).Str("path", r.URL.Path).Msg("api request failed")
	w.Header().Set("Retry-After", "1")
	writeProblem(w, r, problem{Status: http.StatusServiceUnavailable, Code: codeUnavailable, Detail: "sluice cannot reach NATS or its store right now; repeat the request"})
}

// recorder remembers a response's status and the request's key id.
type recorder struct {
	http.ResponseWriter
	status  int
	key     string
	written bool
}

type recorderKey struct{}

func (r *recorder) WriteHeader(code int) {
	if !r.written {
		r.status, r.written = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.written = true
	return r.ResponseWriter.Write(b)
}

// Flush lets the event stream flush through the recorder.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
