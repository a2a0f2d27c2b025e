package apisim_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

const simKey = "sim-secret-key"

type simBundle struct {
	sim   *apisim.Media
	srv   *httptest.Server
	clock *testenv.Clock
}

func setupSim(t *testing.T, cfg apisim.MediaConfig) *simBundle {
	t.Helper()
	clock := testenv.NewClock()
	cfg.APIKey = simKey
	cfg.Now = clock.Now
	if cfg.TaskDuration == 0 {
		cfg.TaskDuration = 10 * time.Second
		cfg.PendingFor = 2 * time.Second
	}
	if cfg.ResultSize == 0 {
		cfg.ResultSize = 1000
	}
	sim := apisim.NewMedia(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &simBundle{sim: sim, srv: srv, clock: clock}
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// call sends one request with the bearer key and JSON content type unless
// hdr overrides them ("" deletes).
func (b *simBundle) call(t *testing.T, method, path, body string, hdr map[string]string) answer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, b.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+simKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

var asyncHdr = map[string]string{"X-MultiModal-Async": "true"}

func videoBody(prompt string) string {
	b, _ := json.Marshal(map[string]any{
		"model":      "video-model",
		"input":      map[string]any{"prompt": prompt},
		"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
	})
	return string(b)
}

func speechBody(text string, stream bool) string {
	m := map[string]any{"model": "tts", "input": map[string]any{"text": text, "voice": "alloy"}}
	if stream {
		m["stream_format"] = "sse"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

type taskJSON struct {
	RequestID string `json:"request_id"`
	Output    struct {
		TaskID       string   `json:"task_id"`
		TaskStatus   string   `json:"task_status"`
		SubmitTime   string   `json:"submit_time"`
		EndTime      string   `json:"end_time"`
		Results      []string `json:"results"`
		ErrorCode    *string  `json:"error_code"`
		ErrorMessage *string  `json:"error_message"`
	} `json:"output"`
	Usage map[string]any `json:"usage"`
}

type errJSON struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

func decode[T any](t *testing.T, a answer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(a.body, &v); err != nil {
		t.Fatalf("decode %s: %v", a.body, err)
	}
	return v
}

func (b *simBundle) submitVideo(t *testing.T, prompt string) taskJSON {
	t.Helper()
	a := b.call(t, "POST", "/api/llm/v1/videos/generations", videoBody(prompt), asyncHdr)
	if a.status != http.StatusOK {
		t.Fatalf("submit: %d %s", a.status, a.body)
	}
	return decode[taskJSON](t, a)
}

func (b *simBundle) getTask(t *testing.T, id string) taskJSON {
	t.Helper()
	a := b.call(t, "GET", "/api/llm/v1/tasks/"+id, "", nil)
	if a.status != http.StatusOK {
		t.Fatalf("get: %d %s", a.status, a.body)
	}
	return decode[taskJSON](t, a)
}

func TestMediaValidation(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	long := strings.Repeat("é", 7001)
	video := func(input, params string) string {
		return `{"model":"m","input":` + input + `,"parameters":` + params + `}`
	}
	const okParams = `{"resolution":"768P","duration":5,"ratio":"16:9"}`
	img := dataURI("image/png", testmedia.Fixture(t, "image-384x256.png"))
	tests := []struct {
		name, path, body string
		hdr              map[string]string
		status           int
		param            string
	}{
		{"valid text-to-video", "videos", video(`{"prompt":"p"}`, okParams), asyncHdr, 200, ""},
		{"prompt 7000 runes", "videos", video(`{"prompt":"`+long[2:]+`"}`, okParams), asyncHdr, 200, ""},
		{"no async header", "videos", video(`{"prompt":"p"}`, okParams), nil, 400, "X-MultiModal-Async"},
		{"wrong content type", "videos", video(`{"prompt":"p"}`, okParams), map[string]string{"X-MultiModal-Async": "true", "Content-Type": "text/plain"}, 400, "Content-Type"},
		{"not json", "videos", `{"model":`, asyncHdr, 400, "body"},
		{"unknown field", "videos", `{"model":"m","inputs":{}}`, asyncHdr, 400, "body"},
		{"no model", "videos", `{"input":{"prompt":"p"},"parameters":` + okParams + `}`, asyncHdr, 400, "model"},
		{"no input", "videos", `{"model":"m","parameters":` + okParams + `}`, asyncHdr, 400, "input"},
		{"no prompt", "videos", video(`{}`, okParams), asyncHdr, 400, "input.prompt"},
		{"empty prompt", "videos", video(`{"prompt":" "}`, okParams), asyncHdr, 400, "input.prompt"},
		{"prompt too long", "videos", video(`{"prompt":"`+long+`"}`, okParams), asyncHdr, 400, "input.prompt"},
		{"prompt not a string", "videos", video(`{"prompt":5}`, okParams), asyncHdr, 400, "input.prompt"},
		{"two images", "videos", video(`{"prompt":"p","images":["a","b"]}`, okParams), asyncHdr, 400, "input.images"},
		{"one image no ratio", "videos", video(`{"prompt":"p","images":["`+img+`"]}`, `{"resolution":"2K","duration":4}`), asyncHdr, 200, ""},
		{"bad role", "videos", video(`{"prompt":"p","media":[{"type":"poster","url":"u"}]}`, okParams), asyncHdr, 400, "input.media[0].type"},
		{"no url", "videos", video(`{"prompt":"p","media":[{"type":"first_frame"}]}`, okParams), asyncHdr, 400, "input.media[0].url"},
		{"two first frames", "videos", video(`{"prompt":"p","media":[{"type":"first_frame","url":"a"},{"type":"first_frame","url":"b"}]}`, okParams), asyncHdr, 400, "input.media"},
		{"image plus first frame", "videos", video(`{"prompt":"p","images":["a"],"media":[{"type":"first_frame","url":"b"}]}`, okParams), asyncHdr, 400, "input.media"},
		{"four reference videos", "videos", video(`{"prompt":"p","media":[{"type":"reference_video","url":"a"},{"type":"reference_video","url":"a"},{"type":"reference_video","url":"a"},{"type":"reference_video","url":"a"}]}`, okParams), asyncHdr, 400, "input.media"},
		{"mixed roles", "videos", video(`{"prompt":"p","media":[{"type":"last_frame","url":"a"},{"type":"reference_image","url":"b"}]}`, okParams), asyncHdr, 400, "input.media"},
		{"reference adaptive", "videos", video(`{"prompt":"p","media":[{"type":"reference_image","url":"`+img+`"}]}`, `{"resolution":"768P","duration":15,"ratio":"adaptive"}`), asyncHdr, 200, ""},
		{"no parameters", "videos", `{"model":"m","input":{"prompt":"p"}}`, asyncHdr, 400, "parameters"},
		{"no resolution", "videos", video(`{"prompt":"p"}`, `{"duration":5,"ratio":"16:9"}`), asyncHdr, 400, "parameters.resolution"},
		{"bad resolution", "videos", video(`{"prompt":"p"}`, `{"resolution":"4K","duration":5,"ratio":"16:9"}`), asyncHdr, 400, "parameters.resolution"},
		{"no duration", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","ratio":"16:9"}`), asyncHdr, 400, "parameters.duration"},
		{"duration 3", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","duration":3,"ratio":"16:9"}`), asyncHdr, 400, "parameters.duration"},
		{"duration 16", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","duration":16,"ratio":"16:9"}`), asyncHdr, 400, "parameters.duration"},
		{"duration 5.5", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","duration":5.5,"ratio":"16:9"}`), asyncHdr, 400, "parameters.duration"},
		{"duration string", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","duration":"5","ratio":"16:9"}`), asyncHdr, 400, "parameters.duration"},
		{"text-to-video no ratio", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","duration":5}`), asyncHdr, 400, "parameters.ratio"},
		{"text-to-video adaptive", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","duration":5,"ratio":"adaptive"}`), asyncHdr, 400, "parameters.ratio"},
		{"bad ratio", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","duration":5,"ratio":"2:1"}`), asyncHdr, 400, "parameters.ratio"},
		{"watermark not bool", "videos", video(`{"prompt":"p"}`, `{"resolution":"768P","duration":5,"ratio":"1:1","watermark":"yes"}`), asyncHdr, 400, "parameters.watermark"},
		{"bad directive", "videos", video(`{"prompt":"p [sim:duration=soon]"}`, okParams), asyncHdr, 400, "input.prompt"},
		{"speech valid", "audios", `{"model":"m","input":{"text":"t","voice":"v"}}`, nil, 200, ""},
		{"speech no text", "audios", `{"model":"m","input":{"voice":"v"}}`, nil, 400, "input.text"},
		{"speech no voice", "audios", `{"model":"m","input":{"text":"t"}}`, nil, 400, "input.voice"},
		{"speech no model", "audios", `{"input":{"text":"t","voice":"v"}}`, nil, 400, "model"},
		{"speech bad stream format", "audios", `{"model":"m","input":{"text":"t","voice":"v"},"stream_format":"ws"}`, nil, 400, "stream_format"},
		{"speech stream without accept", "audios", `{"model":"m","input":{"text":"t","voice":"v"},"stream_format":"sse"}`, nil, 400, "Accept"},
		{"batch empty", "tasks", `{"task_ids":[]}`, nil, 400, "task_ids"},
		{"batch missing", "tasks", `{}`, nil, 400, "task_ids"},
		{"batch eleven", "tasks", `{"task_ids":["1","2","3","4","5","6","7","8","9","10","11"]}`, nil, 400, "task_ids"},
		{"batch empty id", "tasks", `{"task_ids":["1",""]}`, nil, 400, "task_ids[1]"},
	}
	paths := map[string]string{"videos": "/api/llm/v1/videos/generations", "audios": "/api/llm/v1/audios/generations", "tasks": "/api/llm/v1/tasks"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := b.call(t, "POST", paths[tt.path], tt.body, tt.hdr)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %s", a.status, tt.status, a.body)
			}
			if tt.status == 200 {
				return
			}
			e := decode[errJSON](t, a)
			if e.Error.Type != "invalid_request_error" || e.Error.Code != "invalid_parameter" || e.RequestID == "" {
				t.Errorf("error shape %s", a.body)
			}
			if e.Error.Param == nil || *e.Error.Param != tt.param {
				t.Errorf("param %v, want %q (%s)", e.Error.Param, tt.param, a.body)
			}
			if e.Error.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

func TestMediaAuth(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	for _, auth := range []string{"", "Bearer wrong", "Bearer ", simKey, "Basic " + simKey} {
		a := b.call(t, "GET", "/api/llm/v1/tasks/x", "", map[string]string{"Authorization": auth})
		if a.status != http.StatusUnauthorized {
			t.Fatalf("auth %q: status %d", auth, a.status)
		}
		e := decode[errJSON](t, a)
		if e.Error.Type != "authentication_error" || e.Error.Code != "invalid_api_key" {
			t.Errorf("auth %q: %s", auth, a.body)
		}
		if strings.Contains(string(a.body), "wrong") {
			t.Errorf("answer echoes the key: %s", a.body)
		}
	}
}

func TestMediaVideoLifecycle(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{ResultSize: 5000})
	sub := b.submitVideo(t, "a boat [sim:count=2]")
	if sub.Output.TaskStatus != "pending" || sub.Output.TaskID == "" || sub.RequestID == "" {
		t.Fatalf("submit answer %+v", sub)
	}
	id := sub.Output.TaskID
	if got := b.getTask(t, id); got.Output.TaskStatus != "pending" || got.Output.SubmitTime == "" || got.Output.Results != nil || got.Usage != nil {
		t.Fatalf("at 0s: %+v", got)
	}
	b.clock.Advance(2 * time.Second)
	if got := b.getTask(t, id).Output.TaskStatus; got != "running" {
		t.Fatalf("at 2s: %s", got)
	}
	b.clock.Advance(8 * time.Second)
	got := b.getTask(t, id)
	if got.Output.TaskStatus != "succeeded" || len(got.Output.Results) != 2 || got.Output.EndTime == "" {
		t.Fatalf("at 10s: %+v", got)
	}
	if _, err := time.Parse(time.RFC3339, got.Output.EndTime); err != nil {
		t.Errorf("end_time %q: %v", got.Output.EndTime, err)
	}
	wantUsage := map[string]any{"video_count": 2.0, "video_duration": 5.0, "resolution": "768P", "ratio": "16:9", "image_count": 0.0}
	if fmt.Sprint(got.Usage) != fmt.Sprint(wantUsage) {
		t.Errorf("usage %v, want %v", got.Usage, wantUsage)
	}
	for n, u := range got.Output.Results {
		if !strings.HasPrefix(u, b.srv.URL+"/sim/results/") || !strings.HasSuffix(u, fmt.Sprintf("/%d.mp4", n)) {
			t.Fatalf("result url %q", u)
		}
		resp, err := http.Get(u) // no bearer: like a CDN
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		size, err := io.Copy(h, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || size != 5000 {
			t.Fatalf("download %d: status %d size %d err %v", n, resp.StatusCode, size, err)
		}
		if resp.Header.Get("Content-Type") != "video/mp4" || resp.Header.Get("Content-Length") != "5000" {
			t.Errorf("headers %v", resp.Header)
		}
		want := sha256.New()
		_, _ = io.Copy(want, apisim.ResultBytes(id, n, 5000))
		if !bytes.Equal(h.Sum(nil), want.Sum(nil)) {
			t.Errorf("result %d bytes differ from ResultBytes", n)
		}
	}
	// Result 2 does not exist, nor does a result of an unknown task.
	for _, p := range []string{"/sim/results/" + id + "/2.mp4", "/sim/results/" + id + "/0.mp3", "/sim/results/nope/0.mp4"} {
		if a := b.call(t, "GET", p, "", nil); a.status != 404 {
			t.Errorf("%s: %d", p, a.status)
		}
	}
	c := b.sim.Counters()
	for _, name := range []string{"tasks:pending", "tasks:running", "tasks:succeeded"} {
		if c.Get(name) != 1 {
			t.Errorf("%s = %d, want 1", name, c.Get(name))
		}
	}
	if c.Get("requests:video.submit:200") != 1 || c.Get("requests:task.get:200") != 3 {
		t.Errorf("request counters %v", c.Snapshot())
	}
	if b.sim.SubmitCount("a boat [sim:count=2]") != 1 || c.Get("submits:a boat [sim:count=2]") != 1 {
		t.Errorf("submit count %d", b.sim.SubmitCount("a boat [sim:count=2]"))
	}
}

func TestMediaResultRangeAndCut(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	id := b.submitVideo(t, "ranged [sim:duration=0s] [sim:size=100000]").Output.TaskID
	u := b.getTask(t, id).Output.Results[0]
	full, _ := io.ReadAll(apisim.ResultBytes(id, 0, 100000))

	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Range", "bytes=40000-40099")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, full[40000:40100]) {
		t.Fatalf("range: status %d, %d bytes, equal %v", resp.StatusCode, len(part), bytes.Equal(part, full[40000:40100]))
	}

	cut := b.submitVideo(t, "cut [sim:duration=0s] [sim:size=100000] [sim:result-cut]").Output.TaskID
	resp, err = http.Get(b.getTask(t, cut).Output.Results[0])
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || len(got) >= 100000 {
		t.Fatalf("cut download: %d bytes, err %v", len(got), err)
	}
}

func TestMediaResultBytesSeek(t *testing.T) {
	t.Parallel()
	full, _ := io.ReadAll(apisim.ResultBytes("t-1", 3, 1000))
	if len(full) != 1000 {
		t.Fatalf("len %d", len(full))
	}
	again, _ := io.ReadAll(apisim.ResultBytes("t-1", 3, 1000))
	other, _ := io.ReadAll(apisim.ResultBytes("t-1", 4, 1000))
	if !bytes.Equal(full, again) || bytes.Equal(full, other) {
		t.Fatal("ResultBytes is not deterministic per (task, n)")
	}
	rs := apisim.ResultBytes("t-1", 3, 1000).(io.ReadSeeker)
	for _, off := range []int64{0, 1, 15, 16, 17, 999, 1000} {
		if _, err := rs.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(rs)
		if !bytes.Equal(rest, full[off:]) {
			t.Errorf("seek %d: bytes differ", off)
		}
	}
}

func TestMediaFailedTask(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	id := b.submitVideo(t, "doomed [sim:fail=QuotaExceeded]").Output.TaskID
	b.clock.Advance(time.Minute)
	got := b.getTask(t, id)
	if got.Output.TaskStatus != "failed" || got.Output.ErrorCode == nil || *got.Output.ErrorCode != "QuotaExceeded" ||
		got.Output.ErrorMessage == nil || got.Output.Results != nil {
		t.Fatalf("failed task %+v", got)
	}
	if a := b.call(t, "GET", "/sim/results/"+id+"/0.mp4", "", nil); a.status != 404 {
		t.Errorf("result of failed task: %d", a.status)
	}
	if b.sim.Counters().Get("tasks:failed") != 1 {
		t.Errorf("counters %v", b.sim.Counters().Snapshot())
	}
}

func TestMediaFailureRate(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{FailureRate: 1})
	failed := b.submitVideo(t, "by rate [sim:duration=0s]").Output.TaskID
	ok := b.submitVideo(t, "forced ok [sim:duration=0s] [sim:ok]").Output.TaskID
	if st := b.getTask(t, failed).Output.TaskStatus; st != "failed" {
		t.Errorf("rate 1: %s", st)
	}
	if st := b.getTask(t, ok).Output.TaskStatus; st != "succeeded" {
		t.Errorf("[sim:ok]: %s", st)
	}
}

func TestMediaCancel(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	id := b.submitVideo(t, "cancel me").Output.TaskID
	b.clock.Advance(3 * time.Second) // running
	a := b.call(t, "POST", "/api/llm/v1/tasks/"+id+"/cancel", "", map[string]string{"Content-Type": ""})
	if a.status != 200 {
		t.Fatalf("cancel: %d %s", a.status, a.body)
	}
	var raw map[string]any
	_ = json.Unmarshal(a.body, &raw)
	out := raw["output"].(map[string]any)
	if out["task_status"] != "cancelled" || out["results"] != nil || raw["usage"] != nil {
		t.Fatalf("cancel answer %s", a.body)
	}
	for _, k := range []string{"results", "error_code", "error_message"} {
		if _, present := out[k]; !present {
			t.Errorf("cancel answer lacks %s (null): %s", k, a.body)
		}
	}
	b.clock.Advance(time.Hour)
	if st := b.getTask(t, id).Output.TaskStatus; st != "cancelled" {
		t.Fatalf("after cancel: %s", st)
	}
	a = b.call(t, "POST", "/api/llm/v1/tasks/"+id+"/cancel", "", nil)
	e := decode[errJSON](t, a)
	if a.status != 422 || e.Error.Type != "invalid_task_status" || e.Error.Code != "422" || e.Error.Param != nil ||
		!strings.Contains(e.Error.Message, "cancelled") {
		t.Fatalf("second cancel: %d %s", a.status, a.body)
	}
	if a := b.call(t, "POST", "/api/llm/v1/tasks/nope/cancel", "", nil); a.status != 404 {
		t.Errorf("cancel unknown: %d", a.status)
	}
	c := b.sim.Counters()
	if c.Get("tasks:running") != 1 || c.Get("tasks:cancelled") != 1 || c.Get("tasks:succeeded") != 0 {
		t.Errorf("counters %v", c.Snapshot())
	}
}

func TestMediaUnknownTask(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	a := b.call(t, "GET", "/api/llm/v1/tasks/nope", "", nil)
	e := decode[errJSON](t, a)
	if a.status != 404 || e.Error.Code != "task_not_found" {
		t.Fatalf("%d %s", a.status, a.body)
	}
}

func TestMediaBatch(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	done := b.submitVideo(t, "quick [sim:duration=0s]").Output.TaskID
	slow := b.submitVideo(t, "slow [sim:pending=0s] [sim:duration=1h]").Output.TaskID
	a := b.call(t, "POST", "/api/llm/v1/tasks", `{"task_ids":["`+slow+`","unknown","`+done+`"]}`, nil)
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	var raw []map[string]any
	if err := json.Unmarshal(a.body, &raw); err != nil || len(raw) != 2 {
		t.Fatalf("batch %s: %v", a.body, err)
	}
	running := raw[0]["output"].(map[string]any)
	if len(running) != 2 || running["task_id"] != slow || running["task_status"] != "running" || raw[0]["usage"] != nil {
		t.Errorf("running element carries more than id and status: %v", raw[0])
	}
	if out := raw[1]["output"].(map[string]any); out["task_id"] != done || out["task_status"] != "succeeded" || out["results"] == nil {
		t.Errorf("succeeded element %v", raw[1])
	}
}

// sseFrames reads the data of every event of an SSE body.
func sseFrames(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var frames []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
			var f map[string]any
			if err := json.Unmarshal([]byte(data), &f); err != nil {
				t.Fatalf("frame %q: %v", data, err)
			}
			frames = append(frames, f)
		}
	}
	return frames
}

func TestMediaSpeech(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	streamHdr := map[string]string{"Accept": "text/event-stream"}

	t.Run("sync", func(t *testing.T) {
		t.Parallel()
		a := b.call(t, "POST", "/api/llm/v1/audios/generations", speechBody("hello sync", false), nil)
		task := decode[taskJSON](t, a)
		if a.status != 200 || task.Output.TaskStatus != "succeeded" || len(task.Output.Results) != 1 ||
			!strings.HasSuffix(task.Output.Results[0], "/0.mp3") || task.Usage["audio_duration"] == nil {
			t.Fatalf("%d %s", a.status, a.body)
		}
		if !bytes.Contains(a.body, []byte(`"error_code":null`)) {
			t.Errorf("sync answer lacks error_code null: %s", a.body)
		}
		if b.sim.SubmitCount("hello sync") != 1 {
			t.Error("sync submit not counted")
		}
	})
	t.Run("async wav", func(t *testing.T) {
		t.Parallel()
		a := b.call(t, "POST", "/api/llm/v1/audios/generations", speechBody("hello async [sim:format=wav] [sim:duration=0s]", false), asyncHdr)
		task := decode[taskJSON](t, a)
		if a.status != 200 || task.Output.TaskStatus != "pending" {
			t.Fatalf("%d %s", a.status, a.body)
		}
		got := b.getTask(t, task.Output.TaskID)
		if got.Output.TaskStatus != "succeeded" || !strings.HasSuffix(got.Output.Results[0], "/0.wav") || got.Usage["input_chars_num"] == nil {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		text := "hello stream [sim:size=3001] [sim:frames=3]"
		a := b.call(t, "POST", "/api/llm/v1/audios/generations", speechBody(text, true), streamHdr)
		if a.status != 200 || a.header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%d %v", a.status, a.header)
		}
		frames := sseFrames(t, a.body)
		if len(frames) != 4 {
			t.Fatalf("%d frames", len(frames))
		}
		var audio []byte
		for _, f := range frames[:3] {
			out := f["output"].(map[string]any)
			uri := out["results"].([]any)[0].(string)
			payload, ok := strings.CutPrefix(uri, "data:audio/mpeg;base64,")
			if out["task_status"] != "processing" || !ok {
				t.Fatalf("frame %v", f)
			}
			raw, err := base64.StdEncoding.DecodeString(payload)
			if err != nil {
				t.Fatal(err)
			}
			audio = append(audio, raw...)
		}
		last := frames[3]
		if last["output"].(map[string]any)["task_status"] != "succeeded" || last["usage"] == nil {
			t.Fatalf("final frame %v", last)
		}
		want, _ := io.ReadAll(apisim.ResultBytes(last["request_id"].(string), 0, 3001))
		if !bytes.Equal(audio, want) {
			t.Error("stream audio differs from ResultBytes(request_id, 0, size)")
		}
		if b.sim.SubmitCount(text) != 1 {
			t.Error("stream submit not counted")
		}
	})
	t.Run("stream fail", func(t *testing.T) {
		t.Parallel()
		a := b.call(t, "POST", "/api/llm/v1/audios/generations", speechBody("bad stream [sim:fail=Throttled]", true), streamHdr)
		frames := sseFrames(t, a.body)
		last := frames[len(frames)-1]["output"].(map[string]any)
		if last["task_status"] != "failed" || last["error_code"] != "Throttled" || last["error_message"] == "" {
			t.Fatalf("frames %v", frames)
		}
	})
	t.Run("stream cut", func(t *testing.T) {
		t.Parallel()
		a := b.call(t, "POST", "/api/llm/v1/audios/generations", speechBody("cut stream [sim:sse-cut] [sim:frames=4]", true), streamHdr)
		frames := sseFrames(t, a.body)
		if len(frames) != 2 {
			t.Fatalf("%d frames", len(frames))
		}
		for _, f := range frames {
			if f["output"].(map[string]any)["task_status"] != "processing" {
				t.Fatalf("frame %v", f)
			}
		}
	})
}

func TestMediaFaults(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	b.sim.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error500AfterRate: 1})
	a := b.call(t, "POST", "/api/llm/v1/videos/generations", videoBody("after"), asyncHdr)
	e := decode[errJSON](t, a)
	if a.status != 500 || e.Error.Type != "server_error" {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if b.sim.SubmitCount("after") != 1 {
		t.Error("the 500-after fault must still create the task")
	}
	b.sim.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error429Rate: 1, RetryAfter: 3 * time.Second})
	a = b.call(t, "POST", "/api/llm/v1/videos/generations", videoBody("limited"), asyncHdr)
	if a.status != 429 || a.header.Get("Retry-After") != "3" || b.sim.SubmitCount("limited") != 0 {
		t.Fatalf("%d %v", a.status, a.header)
	}
	if c := b.sim.Counters(); c.Get("requests:video.submit:500") != 1 || c.Get("requests:video.submit:429") != 1 {
		t.Errorf("counters %v", c.Snapshot())
	}
}

func TestMediaManyTasksAreCheap(t *testing.T) {
	t.Parallel()
	sim := apisim.NewMedia(apisim.MediaConfig{APIKey: simKey})
	body := videoBody("many")
	for i := range 10000 {
		req := httptest.NewRequest("POST", "/api/llm/v1/videos/generations", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+simKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-MultiModal-Async", "true")
		rec := httptest.NewRecorder()
		sim.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("submit %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	if sim.SubmitCount("many") != 10000 {
		t.Fatalf("count %d", sim.SubmitCount("many"))
	}
}

// A synchronous speech request is synthesized within the request: it never
// counts as a task running upstream, while an asynchronous one does.
func TestSyncSpeechIsNotCountedAsRunning(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	for range 3 {
		if a := b.call(t, "POST", "/api/llm/v1/audios/generations", speechBody("sync", false), nil); a.status != 200 {
			t.Fatalf("sync speech: %d %s", a.status, a.body)
		}
	}
	if p := b.sim.Counters().PeakRunning(); p != 0 {
		t.Fatalf("peak %d after three synchronous requests, want 0", p)
	}
	if a := b.call(t, "POST", "/api/llm/v1/audios/generations", speechBody("async", false), asyncHdr); a.status != 200 {
		t.Fatalf("async speech: %d %s", a.status, a.body)
	}
	if p := b.sim.Counters().PeakRunning(); p != 1 {
		t.Fatalf("peak %d after an asynchronous request, want 1", p)
	}
}

// platformErr is the platform's own error envelope, which its 433 answers
// carry (platform-evidence.md section 6).
type platformErr struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

// TestMediaConcurrencyLimit: with a concurrency limit, a submit while that
// many tasks are pending or running is answered 433 with code 10007 and
// creates nothing; once a task ends, a submit passes again. The injected
// fault answers the same; the letter of media-api.md has no such limit.
func TestMediaConcurrencyLimit(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{ConcurrencyLimit: 2})
	b.submitVideo(t, "one")
	b.submitVideo(t, "two")
	a := b.call(t, "POST", "/api/llm/v1/videos/generations", videoBody("three"), asyncHdr)
	if e := decode[platformErr](t, a); a.status != apisim.StatusQuotaExhausted || e.Code != apisim.ConcurrencyConflictCode || e.Msg != apisim.ConcurrencyConflictMessage {
		t.Fatalf("third submit: %d %s, want 433 with code 10007", a.status, a.body)
	}
	if a := b.call(t, "POST", "/api/llm/v1/audios/generations", speechBody("async three", false), asyncHdr); a.status != apisim.StatusQuotaExhausted {
		t.Fatalf("asynchronous speech over the limit: %d %s, want 433", a.status, a.body)
	}
	if n := b.sim.SubmitCount("three"); n != 0 {
		t.Fatalf("a refused submit created %d tasks", n)
	}
	b.clock.Advance(11 * time.Second)
	b.submitVideo(t, "three")
	if n := b.sim.Counters().Get("requests:video.submit:433"); n != 1 {
		t.Errorf("433 answers counted %d, want 1", n)
	}

	f := setupSim(t, apisim.MediaConfig{})
	f.sim.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{ConcurrencyRate: 1, Times: 1})
	a = f.call(t, "POST", "/api/llm/v1/videos/generations", videoBody("fault"), asyncHdr)
	if e := decode[platformErr](t, a); a.status != apisim.StatusQuotaExhausted || e.Code != apisim.ConcurrencyConflictCode {
		t.Fatalf("injected conflict: %d %s, want 433 with code 10007", a.status, a.body)
	}

	l := setupSim(t, apisim.MediaConfig{ConcurrencyLimit: 1, Letter: true})
	l.submitVideo(t, "letter one")
	l.submitVideo(t, "letter two")
}
