package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// timeline stamps, on the harness's clock, every step of a job that can be
// seen from outside the process running it: each NATS message (a core
// subscription to ">" on the server), each request to the media simulator
// and to the S3 store (a front on their handlers). P5 runs one job at a
// time, so a stamp between two publishes belongs to the job of the first,
// but for the last job's tail (its ack and its event's deliveries come
// after the next publish): a step is kept at its last sight in a job,
// which is the job's own, and named by what it is ("state submitting",
// "sim query answered"; a query polled twice shows the later).
type timeline struct {
	mu    sync.Mutex
	start time.Time
	job   map[string]time.Duration
	// offsets holds, per step, its time after the publish in each job
	// that saw it.
	offsets map[string][]time.Duration
	jobs    int
	sub     *nats.Subscription
}

func newTimeline() *timeline {
	return &timeline{offsets: map[string][]time.Duration{}}
}

// tap subscribes the timeline to every message of nc's server.
func (tl *timeline) tap(nc *nats.Conn) error {
	sub, err := nc.Subscribe(">", func(m *nats.Msg) {
		if name := timelineStep(m); name != "" {
			tl.mark(name)
		}
	})
	tl.sub = sub
	return err
}

// timelineStep names the step a NATS message is, or "" for one the
// timeline leaves out (pull requests, inbox replies, the harness's own).
func timelineStep(m *nats.Msg) string {
	op := testenv.Op(m)
	switch {
	case strings.HasPrefix(op, "kv SLUICE_STATE"):
		var rec struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(m.Data, &rec)
		return "state " + cmp.Or(rec.Status, "?")
	case op == "", op == "pull request", strings.HasPrefix(op, "advisory"), strings.HasPrefix(op, "api "):
		return ""
	case op == "publish jobs":
		return "" // the publish itself, stamped by its caller
	}
	return op
}

// front wraps h to stamp each request's arrival and its answer's end as
// "<who> <what> in" and "<who> <what> answered"; what names the request.
func (tl *timeline) front(who string, what func(*http.Request) string) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			name := who + " " + what(r)
			tl.mark(name + " in")
			h.ServeHTTP(w, r)
			tl.mark(name + " answered")
		})
	}
}

// simRequest names a media simulator request: a submit, a query, or a
// result's download.
func simRequest(r *http.Request) string {
	switch {
	case strings.HasSuffix(r.URL.Path, "/generations"):
		return "submit"
	case strings.HasSuffix(r.URL.Path, "/tasks"):
		return "query"
	}
	return strings.ToLower(r.Method) + " result"
}

// s3Request names an S3 request by its method.
func s3Request(r *http.Request) string { return r.Method }

// begin starts the next job, published at at, and keeps the last one's
// steps.
func (tl *timeline) begin(at time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.keep()
	tl.start, tl.job = at, map[string]time.Duration{}
}

// end keeps the current job's steps and stops stamping.
func (tl *timeline) end() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.keep()
	tl.job = nil
}

// keep adds the current job's steps to offsets; call with mu held.
func (tl *timeline) keep() {
	if tl.job == nil {
		return
	}
	tl.jobs++
	for name, d := range tl.job {
		tl.offsets[name] = append(tl.offsets[name], d)
	}
}

// mark stamps step name of the current job at its latest sight.
func (tl *timeline) mark(name string) {
	now := time.Now()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.job == nil {
		return
	}
	tl.job[name] = now.Sub(tl.start)
}

// forget drops the steps kept so far and the current job's (the
// warm-up's).
func (tl *timeline) forget() {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.offsets, tl.jobs, tl.job = map[string][]time.Duration{}, 0, nil
}

// timelineStepAt is one step of a timeline: its median time after the
// publish and in how many of the jobs it was seen.
type timelineStepAt struct {
	name   string
	median time.Duration
	seen   int
}

// medians returns every step's median time after the publish, earliest
// first.
func (tl *timeline) medians() (steps []timelineStepAt, jobs int) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for name, ds := range tl.offsets {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		steps = append(steps, timelineStepAt{name, quantile(ds, 0.5), len(ds)})
	}
	slices.SortFunc(steps, func(a, b timelineStepAt) int { return cmp.Compare(a.median, b.median) })
	return steps, tl.jobs
}

// rows renders the medians as figure rows, each with the step before it.
func (tl *timeline) rows(fig *Figure, who string) {
	steps, jobs := tl.medians()
	var last time.Duration
	for _, s := range steps {
		seen := ""
		if s.seen != jobs {
			seen = fmt.Sprintf(" (in %d of %d jobs)", s.seen, jobs)
		}
		fig.row(who+" timeline: "+s.name, "%.2f ms (+%.2f)%s", millis(s.median), millis(s.median-last), seen)
		last = s.median
	}
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (tl *timeline) close() {
	if tl.sub != nil {
		_ = tl.sub.Unsubscribe()
	}
}
