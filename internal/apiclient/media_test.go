package apiclient_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/testenv"
)

const mediaKey = "sk-media-test-0123456789"

type mediaBundle struct {
	sim    *apisim.Media
	srv    *httptest.Server
	clock  *testenv.Clock
	sleep  *testenv.Sleeper
	client *apiclient.Media
}

// setupMedia starts a media simulator (tasks take 10s, 2s pending; results
// are 1000 bytes) and a client of it. edit may change the client config.
func setupMedia(t *testing.T, edit func(*apiclient.MediaConfig)) *mediaBundle {
	t.Helper()
	clock := testenv.NewClock()
	sim := apisim.NewMedia(apisim.MediaConfig{
		APIKey: mediaKey, TaskDuration: 10 * time.Second, PendingFor: 2 * time.Second,
		ResultSize: 1000, Now: clock.Now,
	})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	b := &mediaBundle{sim: sim, srv: srv, clock: clock, sleep: &testenv.Sleeper{}}
	cfg := apiclient.MediaConfig{
		BaseURL: srv.URL, APIKey: mediaKey, HTTPClient: srv.Client(),
		Sleep: b.sleep.Sleep, Now: clock.Now,
	}
	if edit != nil {
		edit(&cfg)
	}
	client, err := apiclient.NewMedia(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.client = client
	return b
}

// noSecret fails the test when err's text holds the API key.
func noSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), mediaKey) {
		t.Fatalf("error leaks the API key: %v", err)
	}
}

func videoReq(prompt string) apiclient.VideoRequest {
	return apiclient.VideoRequest{
		Model:      "video-model",
		Input:      apiclient.VideoInput{Prompt: prompt},
		Parameters: apiclient.VideoParameters{Resolution: "768P", Duration: 5, Ratio: "16:9"},
	}
}

func speechReq(text string) apiclient.SpeechRequest {
	return apiclient.SpeechRequest{Model: "tts", Input: apiclient.SpeechInput{Text: text, Voice: "alloy"}}
}

func TestNewMediaValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		cfg   apiclient.MediaConfig
		field string
	}{
		{"no base url", apiclient.MediaConfig{APIKey: "k"}, "BaseURL"},
		{"ftp", apiclient.MediaConfig{BaseURL: "ftp://h", APIKey: "k"}, "BaseURL"},
		{"no host", apiclient.MediaConfig{BaseURL: "https://", APIKey: "k"}, "BaseURL"},
		{"query", apiclient.MediaConfig{BaseURL: "https://h/?sig=x", APIKey: "k"}, "BaseURL"},
		{"fragment", apiclient.MediaConfig{BaseURL: "https://h/#f", APIKey: "k"}, "BaseURL"},
		{"credentials", apiclient.MediaConfig{BaseURL: "https://u:p4ss@h", APIKey: "k"}, "BaseURL"},
		{"unparseable", apiclient.MediaConfig{BaseURL: "https://h:port:x/%zz", APIKey: "k"}, "BaseURL"},
		{"no key", apiclient.MediaConfig{BaseURL: "https://h"}, "APIKey"},
		{"key with newline", apiclient.MediaConfig{BaseURL: "https://h", APIKey: "k\nX-Evil: 1"}, "APIKey"},
		{"negative attempts", apiclient.MediaConfig{BaseURL: "https://h", APIKey: "k", MaxAttempts: -1}, "MaxAttempts"},
		{"negative timeout", apiclient.MediaConfig{BaseURL: "https://h", APIKey: "k", AttemptTimeout: -1}, "AttemptTimeout"},
		{"negative backoff", apiclient.MediaConfig{BaseURL: "https://h", APIKey: "k", Backoff: backoff.Exponential{Min: -1}}, "Backoff"},
		{"ok with prefix", apiclient.MediaConfig{BaseURL: "https://h/prefix/", APIKey: "k"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := apiclient.NewMedia(tt.cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), "MediaConfig."+tt.field) {
				t.Fatalf("err %v, want ErrInvalidArgument naming %s", err, tt.field)
			}
			if strings.Contains(err.Error(), "p4ss") || strings.Contains(err.Error(), "sig=x") {
				t.Fatalf("error leaks a secret: %v", err)
			}
		})
	}
}

func TestMediaVideoLifecycle(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx := t.Context()
	task, err := b.client.SubmitVideo(ctx, videoReq("a paper boat"))
	if err != nil {
		t.Fatal(err)
	}
	if task.Output.TaskStatus != apiclient.TaskPending || task.Output.TaskID == "" || task.RequestID == "" {
		t.Fatalf("submit: %+v", task)
	}
	id := task.Output.TaskID

	got, err := b.client.GetTask(ctx, id)
	if err != nil || got.Output.TaskStatus != apiclient.TaskPending || got.Usage != nil || got.Output.Results != nil {
		t.Fatalf("pending: %+v %v", got, err)
	}
	b.clock.Advance(3 * time.Second)
	if got, err = b.client.GetTask(ctx, id); err != nil || got.Output.TaskStatus != apiclient.TaskRunning {
		t.Fatalf("running: %+v %v", got, err)
	}
	b.clock.Advance(10 * time.Second)
	got, err = b.client.GetTask(ctx, id)
	if err != nil || got.Output.TaskStatus != apiclient.TaskSucceeded || !got.Output.TaskStatus.Terminal() {
		t.Fatalf("succeeded: %+v %v", got, err)
	}
	if len(got.Output.Results) != 1 || got.Output.EndTime == "" || got.Output.ErrorCode != nil {
		t.Fatalf("succeeded output %+v", got.Output)
	}
	var usage map[string]any
	if err := json.Unmarshal(got.Usage, &usage); err != nil || usage["video_duration"] != 5.0 || usage["ratio"] != "16:9" {
		t.Fatalf("usage %s: %v", got.Usage, err)
	}
	// The result is the simulator's deterministic file.
	resp, err := http.Get(got.Output.Results[0])
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, _ = io.Copy(h, resp.Body)
	resp.Body.Close()
	want := sha256.New()
	_, _ = io.Copy(want, apisim.ResultBytes(id, 0, 1000))
	if string(h.Sum(nil)) != string(want.Sum(nil)) {
		t.Error("result bytes differ")
	}
	if n := b.sim.SubmitCount("a paper boat"); n != 1 {
		t.Errorf("SubmitCount %d", n)
	}
}

func TestMediaFailedTaskIsData(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	task, err := b.client.SubmitVideo(t.Context(), videoReq("doomed [sim:fail=ContentRejected]"))
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	got, err := b.client.GetTask(t.Context(), task.Output.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Output.TaskStatus != apiclient.TaskFailed || got.Output.ErrorCode == nil || *got.Output.ErrorCode != "ContentRejected" ||
		got.Output.ErrorMessage == nil || *got.Output.ErrorMessage == "" {
		t.Fatalf("failed task %+v", got.Output)
	}
}

func TestMediaSpeech(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx := t.Context()

	t.Run("sync", func(t *testing.T) {
		t.Parallel()
		task, err := b.client.SubmitSpeechSync(ctx, speechReq("hello there"))
		if err != nil {
			t.Fatal(err)
		}
		var usage map[string]any
		_ = json.Unmarshal(task.Usage, &usage)
		if task.Output.TaskStatus != apiclient.TaskSucceeded || len(task.Output.Results) != 1 ||
			task.Output.ErrorCode != nil || task.Output.ErrorMessage != nil || usage["audio_duration"] == nil {
			t.Fatalf("%+v usage %s", task, task.Usage)
		}
	})
	t.Run("async", func(t *testing.T) {
		t.Parallel()
		task, err := b.client.SubmitSpeechAsync(ctx, speechReq("hello later [sim:duration=0s]"))
		if err != nil || task.Output.TaskStatus != apiclient.TaskPending {
			t.Fatalf("%+v %v", task, err)
		}
		got, err := b.client.GetTask(ctx, task.Output.TaskID)
		if err != nil || got.Output.TaskStatus != apiclient.TaskSucceeded || !strings.HasSuffix(got.Output.Results[0], ".mp3") {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("stream format refused", func(t *testing.T) {
		t.Parallel()
		req := speechReq("x")
		req.StreamFormat = "sse"
		for _, submit := range []func(context.Context, apiclient.SpeechRequest) (*apiclient.Task, error){
			b.client.SubmitSpeechSync, b.client.SubmitSpeechAsync,
		} {
			if _, err := submit(ctx, req); !errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), "stream_format") {
				t.Fatalf("err %v", err)
			}
		}
	})
}

func TestMediaBatch(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx := t.Context()
	var ids []string
	for _, p := range []string{"one [sim:duration=0s]", "two [sim:pending=0s] [sim:duration=1h]", "three"} {
		task, err := b.client.SubmitVideo(ctx, videoReq(p))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.Output.TaskID)
	}
	tasks, err := b.client.GetTasks(ctx, append(ids, "unknown-id"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 3 {
		t.Fatalf("%d tasks", len(tasks))
	}
	want := []apiclient.TaskStatus{apiclient.TaskSucceeded, apiclient.TaskRunning, apiclient.TaskPending}
	for i, task := range tasks {
		if task.Output.TaskID != ids[i] || task.Output.TaskStatus != want[i] {
			t.Errorf("element %d: %+v", i, task.Output)
		}
	}
	// A running element carries only id and status: nothing is invented.
	if r := tasks[1]; r.Usage != nil || r.Output.SubmitTime != "" || r.Output.Results != nil || r.Output.ErrorCode != nil {
		t.Errorf("running element %+v", r)
	}
	if len(tasks[0].Output.Results) != 1 || tasks[0].Usage == nil {
		t.Errorf("succeeded element %+v", tasks[0])
	}

	t.Run("eleven ids are refused before sending", func(t *testing.T) {
		before := b.sim.Counters().Get("requests:task.batch:200")
		eleven := make([]string, 11)
		for i := range eleven {
			eleven[i] = "id"
		}
		_, err := b.client.GetTasks(ctx, eleven)
		if !errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), "task_ids") {
			t.Fatalf("err %v", err)
		}
		if snap := b.sim.Counters().Snapshot(); snap["requests:task.batch:200"] != before || snap["requests:task.batch:400"] != 0 {
			t.Fatalf("a request was sent: %v", snap)
		}
	})
	t.Run("empty id", func(t *testing.T) {
		_, err := b.client.GetTasks(ctx, []string{"a", ""})
		if !errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), "task_ids[1]") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("no ids", func(t *testing.T) {
		tasks, err := b.client.GetTasks(ctx, nil)
		if err != nil || tasks != nil {
			t.Fatalf("%v %v", tasks, err)
		}
	})
}

func TestMediaCancel(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx := t.Context()
	task, err := b.client.SubmitVideo(ctx, videoReq("cancel me"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.client.CancelTask(ctx, task.Output.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Output.TaskStatus != apiclient.TaskCancelled || got.Output.Results != nil || got.Usage != nil ||
		got.Output.ErrorCode != nil || got.Output.EndTime == "" {
		t.Fatalf("cancel answer %+v", got)
	}
	_, err = b.client.CancelTask(ctx, task.Output.TaskID)
	noSecret(t, err)
	if !errors.Is(err, apiclient.ErrTaskTerminal) || !apiclient.IsPermanent(err) || apiclient.IsTransient(err) {
		t.Fatalf("second cancel: %v", err)
	}
	ae, ok := errors.AsType[*apiclient.APIError](err)
	if !ok || ae.Status != 422 || ae.Type != "invalid_task_status" || !strings.Contains(ae.Message, "cancelled") || ae.RequestID == "" {
		t.Fatalf("APIError %+v", ae)
	}
	if len(b.sleep.Waits()) != 0 {
		t.Errorf("a 422 was retried: %v", b.sleep.Waits())
	}
}

func TestMediaDocumentedErrors(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx := t.Context()

	t.Run("parameter error", func(t *testing.T) {
		t.Parallel()
		req := videoReq("p")
		req.Parameters.Duration = 16
		_, err := b.client.SubmitVideo(ctx, req)
		ae, ok := errors.AsType[*apiclient.APIError](err)
		if !ok || ae.Status != 400 || ae.Code != "invalid_parameter" || ae.Param != "parameters.duration" ||
			ae.Type != "invalid_request_error" || errors.Is(err, apiclient.ErrAmbiguous) || !apiclient.IsPermanent(err) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("unknown task", func(t *testing.T) {
		t.Parallel()
		for _, call := range []func(context.Context, string) (*apiclient.Task, error){b.client.GetTask, b.client.CancelTask} {
			_, err := call(ctx, "no/such task")
			if !errors.Is(err, apiclient.ErrTaskNotFound) || !apiclient.IsPermanent(err) {
				t.Fatalf("err %v", err)
			}
		}
	})
	t.Run("empty id", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"", ".", ".."} {
			if _, err := b.client.GetTask(ctx, id); !errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), "task_id") {
				t.Fatalf("id %q: %v", id, err)
			}
		}
	})
	t.Run("bad key", func(t *testing.T) {
		t.Parallel()
		const wrong = "sk-wrong-key-987654"
		c, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: b.srv.URL, APIKey: wrong, HTTPClient: b.srv.Client(), Sleep: b.sleep.Sleep})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.GetTask(ctx, "x")
		if !errors.Is(err, apiclient.ErrUnauthorized) || !apiclient.IsPermanent(err) || strings.Contains(err.Error(), wrong) {
			t.Fatalf("err %v", err)
		}
		_, err = c.SubmitVideo(ctx, videoReq("unpaid"))
		if !errors.Is(err, apiclient.ErrUnauthorized) || b.sim.SubmitCount("unpaid") != 0 {
			t.Fatalf("err %v", err)
		}
	})
}

// TestMediaKeyNeverInErrors drives every call against a server that echoes
// the Authorization header and a presigned-looking URL into its answers.
func TestMediaKeyNeverInErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msg := "denied for " + r.Header.Get("Authorization") + " fetching https://bucket.s3.test/k?X-Amz-Signature=abc123 body " + string(body)
		switch {
		case strings.HasSuffix(r.URL.Path, "/cancel"):
			w.WriteHeader(http.StatusBadGateway) // not the documented shape
			_, _ = io.WriteString(w, "<html>"+msg+"</html>")
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "t", "code": "c"}})
		}
	}))
	t.Cleanup(srv.Close)
	c, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: srv.URL, APIKey: mediaKey, HTTPClient: srv.Client(),
		MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	req := videoReq("p")
	req.Input.Media = []apiclient.MediaInput{{Type: apiclient.RoleFirstFrame, URL: "https://bucket.s3.test/img.png?X-Amz-Signature=abc123"}}
	var errs []error
	_, err = c.SubmitVideo(ctx, req)
	errs = append(errs, err)
	_, err = c.SubmitSpeechSync(ctx, speechReq("t"))
	errs = append(errs, err)
	_, err = c.StreamSpeech(ctx, speechReq("t"))
	errs = append(errs, err)
	_, err = c.GetTask(ctx, "x")
	errs = append(errs, err)
	_, err = c.GetTasks(ctx, []string{"x"})
	errs = append(errs, err)
	_, err = c.CancelTask(ctx, "x")
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("call %d: no error", i)
		}
		for _, secret := range []string{mediaKey, "abc123", "X-Amz-Signature="} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("call %d: error holds %q: %v", i, secret, err)
			}
		}
	}
	if ae, ok := errors.AsType[*apiclient.APIError](errs[5]); !ok || ae.Status != 502 || !strings.Contains(ae.Message, "denied") {
		t.Errorf("undocumented body: %v", errs[5])
	}
}

func TestMediaSendsHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.EscapedPath()] = r.Header.Clone()
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"request_id":"r","output":{"task_id":"a/b","task_status":"pending"}}`)
	}))
	t.Cleanup(srv.Close)
	c, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: srv.URL + "/base/", APIKey: mediaKey, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_, _ = c.SubmitVideo(ctx, videoReq("p"))
	_, _ = c.SubmitSpeechSync(ctx, speechReq("t"))
	_, _ = c.GetTask(ctx, "a/b")
	_, _ = c.CancelTask(ctx, "a/b")
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{
		"POST /base/api/llm/v1/videos/generations", "POST /base/api/llm/v1/audios/generations",
		"GET /base/api/llm/v1/tasks/a%2Fb", "POST /base/api/llm/v1/tasks/a%2Fb/cancel",
	} {
		h, ok := seen[k]
		if !ok {
			t.Fatalf("no request %s (saw %v)", k, seen)
		}
		if h.Get("Authorization") != "Bearer "+mediaKey || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s: headers %v", k, h)
		}
	}
	if seen["POST /base/api/llm/v1/videos/generations"].Get("X-MultiModal-Async") != "true" {
		t.Error("video submit without X-MultiModal-Async")
	}
	if seen["POST /base/api/llm/v1/audios/generations"].Get("X-MultiModal-Async") != "" {
		t.Error("sync speech with X-MultiModal-Async")
	}
}

// TestMediaBatchBadElement: one malformed element of a batch answer does
// not lose the others: GetTasks returns every well-formed element and a
// *BadElementsError naming the task whose element it could not read, for
// the caller to ask alone.
func TestMediaBatchBadElement(t *testing.T) {
	t.Parallel()
	b := setupMedia(t, nil)
	ctx := t.Context()
	var ids []string
	for _, p := range []string{"good [sim:duration=0s]", "bad [sim:bad-element] [sim:duration=0s]", "also good"} {
		task, err := b.client.SubmitVideo(ctx, videoReq(p))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.Output.TaskID)
	}
	tasks, err := b.client.GetTasks(ctx, ids)
	var bad *apiclient.BadElementsError
	if !errors.As(err, &bad) || !slices.Equal(bad.TaskIDs, []string{ids[1]}) || apiclient.IsPermanent(err) {
		t.Fatalf("err %v, want a BadElementsError naming %s only", err, ids[1])
	}
	if len(tasks) != 2 || tasks[0].Output.TaskID != ids[0] || tasks[1].Output.TaskID != ids[2] {
		t.Fatalf("tasks %+v, want the two well-formed elements", tasks)
	}
	if task, err := b.client.GetTask(ctx, ids[1]); err != nil || task.Output.TaskStatus != apiclient.TaskSucceeded {
		t.Fatalf("the task asked alone: %+v, %v", task, err)
	}
}
