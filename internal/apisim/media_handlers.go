package apisim

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// authorized checks the bearer key and answers 401 when it is wrong.
func (m *Media) authorized(w http.ResponseWriter, r *http.Request) bool {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && key != "" && (m.cfg.APIKey == "" || key == m.cfg.APIKey) {
		return true
	}
	// Never echo what was sent: it may be someone's key.
	m.writeError(w, http.StatusUnauthorized, "authentication_error", "invalid_api_key", "", "missing or invalid API key")
	return false
}

// submitVideo handles POST /api/llm/v1/videos/generations.
func (m *Media) submitVideo(w http.ResponseWriter, r *http.Request) {
	if !m.authorized(w, r) {
		return
	}
	if r.Header.Get("X-MultiModal-Async") != "true" {
		m.writeParamError(w, "X-MultiModal-Async", "header must be true: video generation is asynchronous")
		return
	}
	var b videoBody
	if perr := decodeBody(r, &b); perr != nil {
		m.writeParamError(w, perr.param, perr.msg)
		return
	}
	f, perr := validateVideo(&b, m.cfg.Letter)
	if perr == nil {
		perr = m.checkInputs(r.Context(), &b)
	}
	if perr != nil {
		m.writeParamError(w, perr.param, perr.msg)
		return
	}
	d, err := m.parseDirectives(f.prompt)
	if err != nil {
		m.writeParamError(w, "input.prompt", err.Error())
		return
	}
	usage := map[string]any{
		"video_count":    d.count,
		"video_duration": f.duration,
		"resolution":     f.resolution,
		"ratio":          f.ratio,
		"image_count":    f.images,
	}
	now := m.cfg.Now()
	m.mu.Lock()
	if m.overLimit(now) {
		m.mu.Unlock()
		writeConcurrencyConflict(w)
		return
	}
	t := m.newTask(m.nextID("vt"), false, false, d, now, usage)
	t.owner = f.prompt
	m.countSubmit(f.prompt)
	m.observe(t, now)
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"request_id": m.nextID("req"),
		"output":     map[string]any{"task_id": t.id, "task_status": statusPending},
	})
}

// overLimit reports whether a new task would pass the account's
// concurrency limit (MediaConfig.ConcurrencyLimit); call with m.mu held,
// so that two submits cannot both take the last place.
func (m *Media) overLimit(now time.Time) bool {
	return !m.cfg.Letter && m.cfg.ConcurrencyLimit > 0 && m.counters.running(now) >= m.cfg.ConcurrencyLimit
}

// countSubmit records an accepted paid submission (and saves the state,
// the new task included); call with m.mu held.
func (m *Media) countSubmit(promptOrText string) {
	m.submits[promptOrText]++
	m.counters.Add("submits:"+promptOrText, 1)
	m.save()
}

// speechUsage is the usage of a synthesis of text lasting seconds.
func speechUsage(text string, seconds int, withDuration bool) map[string]any {
	chars := utf8.RuneCountInString(text)
	completion := seconds * 50
	u := map[string]any{
		"audio_count":     1,
		"input_chars_num": chars,
		"token_usage": map[string]any{
			"prompt_tokens":     chars,
			"completion_tokens": completion,
			"total_tokens":      chars + completion,
		},
	}
	if withDuration {
		u["audio_duration"] = seconds
	}
	return u
}

// audioSeconds is the simulated length of speaking text.
func audioSeconds(text string) int { return 1 + utf8.RuneCountInString(text)/15 }

// submitSpeech handles POST /api/llm/v1/audios/generations: synchronous,
// asynchronous (X-MultiModal-Async: true) or streamed (stream_format sse).
func (m *Media) submitSpeech(w http.ResponseWriter, r *http.Request) {
	if !m.authorized(w, r) {
		return
	}
	var b speechBody
	if perr := decodeBody(r, &b); perr != nil {
		m.writeParamError(w, perr.param, perr.msg)
		return
	}
	text, stream, perr := validateSpeech(&b)
	if perr != nil {
		m.writeParamError(w, perr.param, perr.msg)
		return
	}
	if stream && !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		m.writeParamError(w, "Accept", "header must accept text/event-stream when stream_format is sse")
		return
	}
	d, err := m.parseDirectives(text)
	if err != nil {
		m.writeParamError(w, "input.text", err.Error())
		return
	}
	if stream {
		m.mu.Lock()
		m.countSubmit(text)
		m.mu.Unlock()
		m.streamSpeech(w, r, text, d)
		return
	}
	async := r.Header.Get("X-MultiModal-Async") == "true"
	secs := audioSeconds(text)
	now := m.cfg.Now()
	m.mu.Lock()
	if async && m.overLimit(now) {
		m.mu.Unlock()
		writeConcurrencyConflict(w)
		return
	}
	t := m.newTask(m.nextID("st"), true, !async, d, now, speechUsage(text, secs, !async))
	t.owner = text
	m.countSubmit(text)
	st := m.observe(t, now)
	requestID := m.nextID("req")
	view := m.taskView(r, t, st, requestID, true)
	m.mu.Unlock()
	if async {
		writeJSON(w, http.StatusOK, map[string]any{
			"request_id": requestID,
			"output":     map[string]any{"task_id": t.id, "task_status": statusPending},
		})
		return
	}
	// Synchronous: the finished task. A failed synthesis (not shown
	// upstream) is a failed task with error_code and error_message.
	out := view["output"].(map[string]any)
	for _, k := range []string{"results", "error_code", "error_message"} {
		if _, ok := out[k]; !ok {
			out[k] = nil
		}
	}
	if d.noTaskID {
		delete(out, "task_id")
	}
	writeJSON(w, http.StatusOK, view)
}

// getTask handles GET /api/llm/v1/tasks/{task_id}.
func (m *Media) getTask(w http.ResponseWriter, r *http.Request) {
	if !m.authorized(w, r) {
		return
	}
	id := r.PathValue("task_id")
	now := m.cfg.Now()
	m.mu.Lock()
	t, ok := m.tasks[id]
	var view map[string]any
	if ok {
		view = m.taskView(r, t, m.observe(t, now), m.nextID("req"), true)
	}
	m.mu.Unlock()
	if !ok {
		m.writeTaskNotFound(w)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

// writeTaskNotFound answers an unknown task id (not shown upstream): 404.
func (m *Media) writeTaskNotFound(w http.ResponseWriter) {
	m.writeError(w, http.StatusNotFound, "invalid_request_error", "task_not_found", "task_id", "task not found")
}

// maxBatch is the most task ids one batch query may ask for.
const maxBatch = 10

// getTasks handles POST /api/llm/v1/tasks. Unknown ids are left out of the
// answer (not shown upstream).
func (m *Media) getTasks(w http.ResponseWriter, r *http.Request) {
	if !m.authorized(w, r) {
		return
	}
	var b struct {
		TaskIDs *[]*string `json:"task_ids"`
	}
	if perr := decodeBody(r, &b); perr != nil {
		m.writeParamError(w, perr.param, perr.msg)
		return
	}
	if b.TaskIDs == nil || len(*b.TaskIDs) == 0 {
		m.writeParamError(w, "task_ids", "is required and must not be empty")
		return
	}
	ids := *b.TaskIDs
	if len(ids) > maxBatch {
		m.writeParamError(w, "task_ids", "has "+strconv.Itoa(len(ids))+" ids, at most 10 are allowed per call")
		return
	}
	for i, id := range ids {
		if id == nil || *id == "" {
			m.writeParamError(w, "task_ids["+strconv.Itoa(i)+"]", "must be a non-empty string")
			return
		}
	}
	requestID := m.nextID("req")
	now := m.cfg.Now()
	views := make([]map[string]any, 0, len(ids))
	m.mu.Lock()
	for _, id := range ids {
		if t, ok := m.tasks[*id]; ok {
			view := m.taskView(r, t, m.observe(t, now), requestID, false)
			if t.d.badElement {
				view["output"].(map[string]any)["task_status"] = 7
			}
			views = append(views, view)
		}
	}
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, views)
}

// cancelTask handles POST /api/llm/v1/tasks/{task_id}/cancel.
func (m *Media) cancelTask(w http.ResponseWriter, r *http.Request) {
	if !m.authorized(w, r) {
		return
	}
	id := r.PathValue("task_id")
	now := m.cfg.Now()
	m.mu.Lock()
	t, ok := m.tasks[id]
	if !ok {
		m.mu.Unlock()
		m.writeTaskNotFound(w)
		return
	}
	st := m.observe(t, now)
	if st != statusPending && st != statusRunning {
		m.mu.Unlock()
		m.writeError(w, http.StatusUnprocessableEntity, "invalid_task_status", "422", "",
			"task "+id+" is already in terminal status "+st)
		return
	}
	if t.d.cancelRunning && !t.cancelAsked {
		// [sim:cancel-running]: acknowledged, not (yet) done.
		t.cancelAsked = true
		view := m.taskView(r, t, st, m.nextID("req"), true)
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, view)
		return
	}
	t.cancelled = now
	m.counters.cancelled(t.load)
	m.save()
	// The answer of a cancel carries every optional field, nulls included.
	view := m.taskView(r, t, m.observe(t, now), m.nextID("req"), true)
	m.mu.Unlock()
	writeJSON(w, http.StatusOK, view)
}
