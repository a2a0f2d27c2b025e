package apisim

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Task statuses of the media API (section 3).
const (
	statusPending   = "pending"
	statusRunning   = "running"
	statusSucceeded = "succeeded"
	statusFailed    = "failed"
	statusCancelled = "cancelled"
)

// timeLayout is how the simulator writes submit_time and end_time (the
// spec does not show a format): RFC 3339, UTC, milliseconds.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// simTask is one task's record. Its status is a function of the clock.
type simTask struct {
	id         string
	speech     bool
	created    time.Time
	pendingFor time.Duration
	duration   time.Duration
	cancelled  time.Time // zero unless cancelled
	seen       int       // statuses counted in "tasks:<status>" so far
	// shownRunning: a query has answered "running" (see [sim:show-running]).
	shownRunning bool
	// cancelAsked: a cancel was answered without cancelling (see
	// [sim:cancel-running]).
	cancelAsked bool
	d           directives
	usage       map[string]any // usage once succeeded
	// load is the task in the simulator's count of tasks running.
	load *runningTask
	// owner is the prompt or text it was submitted with (Records).
	owner string
}

// status returns the task's status at now.
func (t *simTask) status(now time.Time) string {
	if !t.cancelled.IsZero() {
		return statusCancelled
	}
	el := now.Sub(t.created)
	switch {
	case el < t.pendingFor:
		return statusPending
	case el < t.duration:
		return statusRunning
	case t.d.fail:
		return statusFailed
	default:
		return statusSucceeded
	}
}

func (t *simTask) endTime() time.Time {
	if !t.cancelled.IsZero() {
		return t.cancelled
	}
	return t.created.Add(t.duration)
}

// ext and contentType of the task's result files.
func (t *simTask) ext() (string, string) {
	switch {
	case !t.speech:
		return ".mp4", "video/mp4"
	case t.d.wav:
		return ".wav", "audio/wav"
	default:
		return ".mp3", "audio/mpeg"
	}
}

// observe counts the statuses t has reached by now in "tasks:<status>";
// call with m.mu held.
func (m *Media) observe(t *simTask, now time.Time) string {
	st := t.status(now)
	if t.d.showRunning && !t.shownRunning && (st == statusSucceeded || st == statusFailed) {
		// [sim:show-running]: no task ends before one query saw it run.
		st = statusRunning
	}
	t.shownRunning = t.shownRunning || st == statusRunning
	var path []string
	switch st {
	case statusPending:
		path = []string{statusPending}
	case statusRunning:
		path = []string{statusPending, statusRunning}
	case statusCancelled:
		// Cancelled from pending or running: count what came before.
		before := t.cancelled.Add(-time.Nanosecond)
		if before.Sub(t.created) >= t.pendingFor {
			path = []string{statusPending, statusRunning, statusCancelled}
		} else {
			path = []string{statusPending, statusCancelled}
		}
	default:
		path = []string{statusPending, statusRunning, st}
		if t.duration == 0 && t.pendingFor == 0 {
			path = []string{st} // born terminal (synchronous speech)
		}
	}
	for _, s := range path[min(t.seen, len(path)):] {
		m.counters.Add("tasks:"+s, 1)
	}
	t.seen = max(t.seen, len(path))
	return st
}

// taskView renders t at now as the documented task object. full adds the
// optional fields of a single query (submit_time on a non-terminal task);
// a batch element of a non-terminal task carries only its id and status.
func (m *Media) taskView(r *http.Request, t *simTask, st string, requestID string, full bool) map[string]any {
	out := map[string]any{"task_id": t.id, "task_status": st}
	view := map[string]any{"request_id": requestID, "output": out}
	terminal := st == statusSucceeded || st == statusFailed || st == statusCancelled
	if full || terminal {
		out["submit_time"] = t.created.UTC().Format(timeLayout)
	}
	if terminal {
		out["end_time"] = t.endTime().UTC().Format(timeLayout)
	}
	switch st {
	case statusSucceeded:
		out["results"] = m.resultURLs(r, t)
		view["usage"] = t.usage
	case statusFailed:
		out["error_code"] = t.d.failCode
		out["error_message"] = "simulated failure of task " + t.id
	case statusCancelled:
		out["results"] = nil
		out["error_code"] = nil
		out["error_message"] = nil
		view["usage"] = nil
	}
	return view
}

// resultURLs are the addresses of t's result files.
func (m *Media) resultURLs(r *http.Request, t *simTask) []string {
	urls := make([]string, t.d.count)
	ext, _ := t.ext()
	base := m.cfg.ResultBaseURL
	if base == "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base = scheme + "://" + r.Host
	}
	base = strings.TrimRight(base, "/")
	for i := range urls {
		if t.d.resultURL != "" {
			urls[i] = t.d.resultURL
			continue
		}
		urls[i] = base + "/sim/results/" + url.PathEscape(t.id) + "/" + strconv.Itoa(i) + ext
	}
	return urls
}

// directives are the per-task overrides found in a prompt or text.
type directives struct {
	fail      bool
	failCode  string
	duration  *time.Duration
	pending   *time.Duration
	size      int64 // -1: the configured size
	count     int
	resultURL string
	resultCut bool
	wav       bool
	frames    int
	sseCut    bool
	sseAbort  bool
	forceOK   bool
	forceFail bool
	// showRunning answers "running" to the first query that would see
	// the task ended, unless one saw it running already: a test can rely
	// on a running observation whatever the poll timing.
	showRunning bool
	// noTaskID leaves output.task_id out of a synchronous speech answer.
	noTaskID bool
	// badElement makes the task's element of a batch query answer
	// malformed (task_status a number); a single query is well formed.
	badElement bool
	// cancelRunning answers the first cancel of the task with its status
	// (running or pending), without cancelling it; the next one cancels.
	cancelRunning bool
	// sseStall makes a stream stop sending after half its frames while
	// holding the connection open.
	sseStall bool
	// frameGap is the pause before each stream frame after the first: a
	// slow stream that keeps moving.
	frameGap time.Duration
}

var directiveRE = regexp.MustCompile(`\[sim:([a-z-]+)(?:=([^\]]*))?\]`)

// maxSimSize caps [sim:size] (64 GiB): results are generated, never stored.
const maxSimSize = 64 << 30

// parseDirectives reads the [sim:...] directives of s; FailureRate is
// drawn here, once per task.
func (m *Media) parseDirectives(s string) (directives, error) {
	d := directives{size: -1, count: 1, frames: 4, failCode: "sim_failure"}
	for _, match := range directiveRE.FindAllStringSubmatch(s, -1) {
		name, val := match[1], match[2]
		var err error
		switch name {
		case "fail":
			d.forceFail = true
			if val != "" {
				d.failCode = val
			}
		case "ok":
			d.forceOK = true
		case "duration", "pending":
			var v time.Duration
			v, err = time.ParseDuration(val)
			if err == nil && v < 0 {
				err = fmt.Errorf("negative")
			}
			if name == "duration" {
				d.duration = &v
			} else {
				d.pending = &v
			}
		case "size":
			d.size, err = strconv.ParseInt(val, 10, 64)
			if err == nil && (d.size < 0 || d.size > maxSimSize) {
				err = fmt.Errorf("out of range [0, %d]", int64(maxSimSize))
			}
		case "count":
			d.count, err = strconv.Atoi(val)
			if err == nil && (d.count < 1 || d.count > 10) {
				err = fmt.Errorf("out of range [1, 10]")
			}
		case "frames":
			d.frames, err = strconv.Atoi(val)
			if err == nil && (d.frames < 1 || d.frames > 1000) {
				err = fmt.Errorf("out of range [1, 1000]")
			}
		case "result-url":
			d.resultURL = val
			if val == "" {
				err = fmt.Errorf("empty")
			}
		case "result-cut":
			d.resultCut = true
		case "format":
			switch val {
			case "wav":
				d.wav = true
			case "mp3":
			default:
				err = fmt.Errorf("want wav or mp3")
			}
		case "sse-cut":
			d.sseCut = true
		case "sse-abort":
			d.sseAbort = true
		case "show-running":
			d.showRunning = true
		case "no-task-id":
			d.noTaskID = true
		case "bad-element":
			d.badElement = true
		case "cancel-running":
			d.cancelRunning = true
		case "sse-stall":
			d.sseStall = true
		case "frame-gap":
			d.frameGap, err = time.ParseDuration(val)
			if err == nil && (d.frameGap < 0 || d.frameGap > time.Minute) {
				err = fmt.Errorf("out of range [0, 1m]")
			}
		default:
			err = fmt.Errorf("unknown directive")
		}
		if err != nil {
			return d, fmt.Errorf("simulator directive [sim:%s]: %v", name, err)
		}
	}
	switch {
	case d.forceFail:
		d.fail = true
	case d.forceOK:
		d.fail = false
	default:
		d.fail = m.cfg.FailureRate > 0 && rand.Float64() < m.cfg.FailureRate
	}
	if d.size < 0 {
		d.size = m.cfg.ResultSize
	}
	return d, nil
}

// newTask records a task created at now; call with m.mu held.
func (m *Media) newTask(id string, speech, sync bool, d directives, now time.Time, usage map[string]any) *simTask {
	t := &simTask{
		id: id, speech: speech, created: now, d: d, usage: usage,
		duration: m.cfg.TaskDuration, pendingFor: m.cfg.PendingFor,
	}
	if d.duration != nil {
		t.duration = *d.duration
		t.pendingFor = min(t.pendingFor, t.duration)
	}
	if d.pending != nil {
		t.pendingFor = *d.pending
		t.duration = max(t.duration, t.pendingFor)
	}
	if sync {
		// Synthesized within the request: never running afterwards.
		t.duration, t.pendingFor = 0, 0
	}
	m.tasks[id] = t
	t.load = m.counters.start(now, t.endTime())
	return t
}
