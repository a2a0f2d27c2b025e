package worker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
)

// hostileMedia is a media API that misbehaves on purpose. A job's prompt
// names its scenario; the task it creates is "t-<scenario>", so task
// queries and result downloads misbehave the same way.
type hostileMedia struct {
	srv *httptest.Server

	mu      sync.Mutex
	submits map[string]int
	queries map[string]int
	echoes  map[string]string // scenario -> what its submit carried
	bodies  map[string][]byte // scenario -> its submit's body
}

func newHostileMedia(t *testing.T) *hostileMedia {
	h := &hostileMedia{submits: map[string]int{}, queries: map[string]int{}, echoes: map[string]string{}, bodies: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/llm/v1/videos/generations", h.submit)
	mux.HandleFunc("POST /api/llm/v1/tasks", h.batch)
	mux.HandleFunc("GET /api/llm/v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		h.answerTasks(w, r, []string{r.PathValue("id")}, false)
	})
	mux.HandleFunc("POST /api/llm/v1/tasks/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		if scenario(r.PathValue("id")) == "poll-hang" {
			<-r.Context().Done() // even the cancel never answers
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write([]byte(`{"error":{"message":"terminal","type":"invalid_task_status","param":null,"code":"422"},"request_id":"r"}`))
	})
	mux.HandleFunc("GET /r/{scenario}/{file}", h.result)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

func scenario(taskID string) string { return strings.TrimPrefix(taskID, "t-") }

func (h *hostileMedia) echo(s string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.echoes[s]
}

func (h *hostileMedia) submitCount(s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.submits[s]
}

// endless writes chunk until the client goes away.
func endless(w http.ResponseWriter, r *http.Request, chunk string) {
	b := []byte(strings.Repeat(chunk, 4096))
	for r.Context().Err() == nil {
		if _, err := w.Write(b); err != nil {
			return
		}
	}
}

func (h *hostileMedia) submit(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var body struct {
		Input struct {
			Prompt string `json:"prompt"`
		} `json:"input"`
	}
	_ = json.Unmarshal(raw, &body)
	s := body.Input.Prompt
	// Everything the request carried, credentials included, for the echo
	// scenarios to send back.
	echo := string(raw) + " Authorization: " + r.Header.Get("Authorization")
	h.mu.Lock()
	h.submits[s]++
	h.echoes[s] = echo
	h.bodies[s] = raw
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch s {
	case "echo-refused":
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"error":      map[string]any{"message": "cannot use " + echo, "type": "invalid_request_error", "param": echo, "code": "invalid_parameter"},
			"request_id": "r-" + echo,
		})
	case "submit-giant":
		_, _ = fmt.Fprintf(w, `{"request_id":"%s","output":{"task_id":"t-x","task_status":"pending"}}`, strings.Repeat("a", 9<<20))
	case "submit-endless":
		_, _ = w.Write([]byte(`{"request_id":"`))
		endless(w, r, "a")
	case "submit-truncated":
		_, _ = w.Write([]byte(`{"request_id":"r-1","output":{"task_id":"t-subm`))
	case "submit-wrong-types":
		_, _ = w.Write([]byte(`{"request_id":7,"output":{"task_id":["t-1"],"task_status":{"s":1}}}`))
	case "submit-redirect":
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam", http.StatusTemporaryRedirect)
	default:
		_, _ = fmt.Fprintf(w, `{"request_id":"r-%s","output":{"task_id":"t-%s","task_status":"pending"}}`, s, s)
	}
}

func (h *hostileMedia) batch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		TaskIDs []string `json:"task_ids"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.TaskIDs) == 0 {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	h.answerTasks(w, r, body.TaskIDs, true)
}

// answerTasks answers a task query about ids (as an array when batch).
// Every "poll-..." scenario misbehaves for the whole answer.
func (h *hostileMedia) answerTasks(w http.ResponseWriter, r *http.Request, ids []string, batch bool) {
	w.Header().Set("Content-Type", "application/json")
	h.mu.Lock()
	for _, id := range ids {
		h.queries[scenario(id)]++
	}
	h.mu.Unlock()
	for _, id := range ids {
		switch scenario(id) {
		case "poll-giant":
			_, _ = fmt.Fprintf(w, `[{"request_id":"%s"}]`, strings.Repeat("b", 9<<20))
			return
		case "poll-endless":
			_, _ = w.Write([]byte(`[`))
			endless(w, r, `{"request_id":"r","output":{"task_id":"t-poll-endless","task_status":"running"}},`)
			return
		case "poll-truncated":
			_, _ = w.Write([]byte(`[{"request_id":"r","output":{"task_id":"t-poll-trunc`))
			return
		case "poll-wrong-types":
			_, _ = w.Write([]byte(`[{"request_id":"r","output":{"task_id":"t-poll-wrong-types","task_status":"succeeded","results":[1,{"u":2}]}}]`))
			return
		case "poll-unknown-status":
			// Well-formed, but a status upstream never documented: the
			// task never ends as far as sluice can tell.
		case "poll-hang":
			<-r.Context().Done()
			return
		case "poll-redirect":
			http.Redirect(w, r, "http://[::ffff:169.254.169.254]/latest/meta-data", http.StatusFound)
			return
		}
	}
	views := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		views = append(views, h.view(id))
	}
	if batch {
		_ = json.NewEncoder(w).Encode(views)
	} else {
		_ = json.NewEncoder(w).Encode(views[0])
	}
}

// view is the task object of id: result scenarios succeed with their
// result addresses.
func (h *hostileMedia) view(id string) map[string]any {
	s := scenario(id)
	port := h.srv.URL[strings.LastIndexByte(h.srv.URL, ':')+1:]
	out := map[string]any{"task_id": id, "task_status": "succeeded"}
	results := map[string]string{
		"result-loopback":        "http://127.0.0.1:" + port + "/r/result-loopback/0.mp4",
		"result-metadata":        "http://169.254.169.254/latest/meta-data/0.mp4",
		"result-mapped-loopback": "http://[::ffff:127.0.0.1]:" + port + "/r/result-mapped-loopback/0.mp4",
		"result-mapped-metadata": "http://[::ffff:169.254.169.254]/latest/0.mp4",
		"result-mapped-private":  "http://[::ffff:10.1.2.3]/0.mp4",
		"result-ipv6-loopback":   "http://[::1]:" + port + "/r/result-ipv6-loopback/0.mp4",
		"result-dns-loopback":    "http://localhost:" + port + "/r/result-dns-loopback/0.mp4",
		"result-file":            "file:///etc/passwd",
		"result-secret-query":    "http://169.254.169.254/0.mp4?X-Amz-Signature=sig-HOSTILE-SECRET&token=tok-HOSTILE-SECRET",
		"result-userinfo":        "http://admin:pw-HOSTILE-SECRET@127.0.0.1:" + port + "/r/result-userinfo/0.mp4",
		"result-endless":         h.srv.URL + "/r/result-endless/0.mp4",
		"result-giant-length":    h.srv.URL + "/r/result-giant-length/0.mp4",
	}
	h.mu.Lock()
	echo, raw := h.echoes[s], h.bodies[s]
	h.mu.Unlock()
	switch {
	case s == "poll-unknown-status":
		out["task_status"] = "exploded"
	case s == "echo-failed":
		out["task_status"], out["error_code"], out["error_message"] = "failed", "bad_input", "could not use "+echo
	case s == "echo-result":
		// The result address is the presigned input address itself.
		var req struct {
			Input struct {
				Media []struct {
					URL string `json:"url"`
				} `json:"media"`
			} `json:"input"`
		}
		if json.Unmarshal(raw, &req) == nil && len(req.Input.Media) > 0 {
			out["results"] = []string{req.Input.Media[0].URL}
		}
	case s == "result-none":
	case results[s] != "":
		out["results"] = []string{results[s]}
	default:
		out["task_status"] = "running"
	}
	return map[string]any{"request_id": "r-" + s, "output": out}
}

func (h *hostileMedia) result(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "video/mp4")
	switch r.PathValue("scenario") {
	case "result-endless":
		endless(w, r, "v")
	case "result-giant-length":
		w.Header().Set("Content-Length", fmt.Sprint(int64(10<<30)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("only this"))
	default:
		_, _ = w.Write([]byte("fine bytes"))
	}
}

// hostileCase is one job against the hostile media API and the failure
// it must end with.
type hostileCase struct {
	scenario string
	code     string
	stage    state.Stage
}

// runHostile runs every case's job on one worker against h and checks
// that each ends with exactly one failed event carrying its code and stage
// within its deadline, and that no submit was repeated.
func runHostile(t *testing.T, cases []hostileCase, within time.Duration, mutate func(*config.Config)) {
	t.Helper()
	b := setup(t, setupOpts{})
	h := newHostileMedia(t)
	b.start(t, func(c *config.Config) {
		c.MediaBaseURL = h.srv.URL
		mutate(c)
	})
	for _, c := range cases {
		b.publish(t, "video", c.scenario, videoSpec(c.scenario, c.scenario))
	}
	for _, c := range cases {
		ev := b.await(t, c.scenario, within)
		e := ev.Data.Error
		if ev.Data.Status != "failed" || e == nil || e.Code != c.code || e.Stage != c.stage || e.Message == "" {
			t.Errorf("%s: %s with error %+v, want failed %s at %s", c.scenario, ev.Data.Status, e, c.code, c.stage)
		}
		if n := h.submitCount(c.scenario); n != 1 {
			t.Errorf("%s: %d submits, want exactly 1", c.scenario, n)
		}
	}
	all := b.logs.String()
	for _, ev := range b.events(t) {
		j, _ := json.Marshal(ev)
		all += string(j)
	}
	for _, m := range b.deadLetters(t) {
		all += fmt.Sprint(m.Header)
	}
	if i := strings.Index(all, "HOSTILE-SECRET"); i >= 0 {
		t.Errorf("a secret of a result address leaked: ...%s...", all[max(0, i-200):min(len(all), i+50)])
	}
	if strings.Contains(all, `"level":"panic"`) || strings.Contains(all, "handler panicked") {
		t.Error("a hostile answer made the worker panic")
	}
}

// A submit answer that is gigantic, endless, truncated, of the wrong types
// or a redirect leaves sluice unsure whether upstream created a task: the
// job fails as submit_ambiguous and is not submitted again.
func TestHostileSubmitAnswers(t *testing.T) {
	t.Parallel()
	code, stage := runner.CodeSubmitAmbiguous, state.StageSubmit
	runHostile(t, []hostileCase{
		{"submit-giant", code, stage},
		{"submit-endless", code, stage},
		{"submit-truncated", code, stage},
		{"submit-wrong-types", code, stage},
		{"submit-redirect", runner.CodeUpstreamRejected, stage},
	}, 3*time.Minute, func(c *config.Config) {
		// A lease that runs out while a slow machine reads an answer
		// would hand the job to a second delivery, which waits out the
		// first and submits again: not what this test is about.
		c.AckWait = time.Minute
	})
}

// Task query answers that are gigantic, endless, truncated, of the wrong
// types, of an undocumented status, redirected or never given cannot end a
// task: each job fails with timeout once SLUICE_TASK_TIMEOUT has passed,
// even when the cancel sent then never answers either.
func TestHostileTaskQueries(t *testing.T) {
	t.Parallel()
	code, stage := runner.CodeTimeout, state.StagePoll
	runHostile(t, []hostileCase{
		{"poll-giant", code, stage},
		{"poll-endless", code, stage},
		{"poll-truncated", code, stage},
		{"poll-wrong-types", code, stage},
		{"poll-unknown-status", code, stage},
		{"poll-redirect", code, stage},
		{"poll-hang", code, stage},
	}, 60*time.Second, func(c *config.Config) { c.TaskTimeout = 5 * time.Second })
}

// Result addresses on loopback, link-local (cloud metadata), private or
// IPv4-mapped IPv6 addresses, DNS names that resolve there, or with a
// non-HTTP scheme are refused before any byte is fetched; their query
// strings and user info never show up anywhere.
func TestHostileResultAddresses(t *testing.T) {
	t.Parallel()
	code, stage := runner.CodeArtifactFetchFailed, state.StageCollect
	runHostile(t, []hostileCase{
		{"result-loopback", code, stage},
		{"result-metadata", code, stage},
		{"result-mapped-loopback", code, stage},
		{"result-mapped-metadata", code, stage},
		{"result-mapped-private", code, stage},
		{"result-ipv6-loopback", code, stage},
		{"result-dns-loopback", code, stage},
		{"result-file", code, stage},
		{"result-secret-query", code, stage},
		{"result-userinfo", code, stage},
		{"result-none", runner.CodeUpstreamFailed, stage},
	}, 30*time.Second, func(c *config.Config) { c.AllowPrivateURLs = false })
}

// A result body that never ends, or announces more than the limit, fails
// the job with artifact_too_large instead of filling the store.
func TestHostileResultBodies(t *testing.T) {
	t.Parallel()
	code, stage := runner.CodeArtifactTooLarge, state.StageCollect
	runHostile(t, []hostileCase{
		{"result-endless", code, stage},
		{"result-giant-length", code, stage},
	}, 30*time.Second, func(c *config.Config) { c.MaxArtifactBytes = 1 << 20 })
}
