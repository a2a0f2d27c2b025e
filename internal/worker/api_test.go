package worker_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// apiKey creates a key of tenant in the bundle's SLUICE_KEYS.
func (b *bundle) apiKey(t *testing.T, tenant string) string {
	t.Helper()
	jc, err := jobclient.Dial(testenv.Context(t, 10*time.Second), jobclient.Config{URL: b.nats.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer jc.Close()
	keys, err := jc.APIKeys(testenv.Context(t, 10*time.Second), true)
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := keys.Create(testenv.Context(t, 10*time.Second), apikeys.Key{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// apiCall sends a request to the worker's HTTP API.
func (b *bundle) apiCall(t *testing.T, method, path, token string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testenv.Context(t, 30*time.Second), method, "http://"+b.ep.APIAddr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

// sseStatuses reads a job's event stream to its end and returns the
// statuses it named.
func sseStatuses(t *testing.T, url, token string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	var statuses []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			statuses = append(statuses, name)
		}
	}
	return statuses
}

// TestAPIEndToEnd: a job submitted over HTTP with a tenant's key runs on
// the worker serving the API, its event stream ends with the terminal
// event, and its artifacts come with presigned links that download the
// very bytes stored.
func TestAPIEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.APIAddr = "127.0.0.1:0" })
	token := b.apiKey(t, "acme")
	spec, _ := json.Marshal(videoSpec("api-1", "a paper boat over http"))

	resp, body := b.apiCall(t, "POST", "/v1/jobs", token, spec)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	statuses := sseStatuses(t, "http://"+b.ep.APIAddr+"/v1/jobs/api-1/events", token)
	if strings.Join(statuses, ",") != "submitted,running,succeeded" {
		t.Errorf("event stream: %v, want submitted,running,succeeded", statuses)
	}
	ev := b.await(t, "api-1", 30*time.Second)
	if ev.Data.Tenant != "acme" {
		t.Errorf("tenant %q, want acme", ev.Data.Tenant)
	}
	_, body = b.apiCall(t, "GET", "/v1/jobs/api-1", token, nil)
	var job struct {
		Status    string `json:"status"`
		Artifacts []struct {
			SHA256      string    `json:"sha256"`
			DownloadURL string    `json:"download_url"`
			ExpiresAt   time.Time `json:"expires_at"`
		} `json:"artifacts"`
	}
	if err := json.Unmarshal(body, &job); err != nil || job.Status != "succeeded" || len(job.Artifacts) == 0 {
		t.Fatalf("job: %s (%v)", body, err)
	}
	for _, a := range job.Artifacts {
		if a.DownloadURL == "" || !a.ExpiresAt.After(time.Now()) {
			t.Fatalf("artifact without a live link: %+v", a)
		}
		dl, err := http.Get(a.DownloadURL)
		if err != nil {
			t.Fatal(err)
		}
		got := sha(dl.Body)
		dl.Body.Close()
		if dl.StatusCode != 200 || got != a.SHA256 {
			t.Errorf("download: %d sha %s, want %s", dl.StatusCode, got, a.SHA256)
		}
	}
	if strings.Contains(b.logs.String(), token) {
		t.Error("the worker's log holds the API key")
	}
}

// TestAPIPageInBrowser: the API's page, in headless Chromium, submits a
// spec with a key and follows the job's event stream (read with fetch, as
// EventSource cannot send the key) to its terminal event; a wrong key
// shows the problem's code.
func TestAPIPageInBrowser(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.APIAddr = "127.0.0.1:0" })
	token := b.apiKey(t, "acme")
	ctx := browser(t)
	page := "http://" + b.ep.APIAddr + "/"

	var result, events, job, failure string
	err := chromedp.Do(ctx,
		chromedp.Navigate(page),
		chromedp.SendKeys(chromedp.CSS(`#key`), "sluice_000000000000_wrong"),
		chromedp.Click(chromedp.CSS(`#submit`)),
		into(chromedp.Poll[bool](`document.getElementById("error").textContent !== ""`), new(bool)),
		into(chromedp.Text(chromedp.CSS(`#error`)), &failure),
		chromedp.SetValue(chromedp.CSS(`#key`), token),
		chromedp.Click(chromedp.CSS(`#submit`)),
		into(chromedp.Poll[bool](`document.getElementById("result").textContent !== "-"`, chromedp.WithPollingTimeout(3*time.Minute)), new(bool)),
		into(chromedp.Text(chromedp.CSS(`#result`)), &result),
		into(chromedp.Text(chromedp.CSS(`#events`)), &events),
		into(chromedp.Text(chromedp.CSS(`#job`)), &job),
	)
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, t.TempDir(), "api")
	if !strings.HasPrefix(failure, "unauthorized") {
		t.Errorf("a wrong key shows %q, want the unauthorized problem", failure)
	}
	if result != "succeeded" || !strings.Contains(events, "submitted") || !strings.Contains(events, "succeeded") {
		t.Errorf("page shows result %q, events %q", result, events)
	}
	if ev := b.await(t, job, 30*time.Second); ev.Data.Tenant != "acme" || ev.Data.Status != "succeeded" {
		t.Errorf("job %s ended %+v", job, ev.Data)
	}
}

// TestAPIRetryAndCancel: a key retries its tenant's failed job as
// <id>-r1, which runs for the same tenant and which the key then sees;
// cancelling an ended job changes nothing.
func TestAPIRetryAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.APIAddr = "127.0.0.1:0" })
	token := b.apiKey(t, "acme")
	spec, _ := json.Marshal(videoSpec("api-fail", "doomed [sim:fail=content_blocked]"))
	if resp, body := b.apiCall(t, "POST", "/v1/jobs", token, spec); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	if ev := b.await(t, "api-fail", time.Minute); ev.Data.Status != "failed" {
		t.Fatalf("api-fail ended %s", ev.Data.Status)
	}
	resp, body := b.apiCall(t, "POST", "/v1/jobs/api-fail/retry", token, nil)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), `"job_id":"api-fail-r1"`) {
		t.Fatalf("retry: %d %s", resp.StatusCode, body)
	}
	ev := b.await(t, "api-fail-r1", time.Minute)
	if ev.Data.Tenant != "acme" || ev.Data.Labels["retry_of"] != "api-fail" {
		t.Errorf("the retry ended %s for tenant %q with labels %v", ev.Data.Status, ev.Data.Tenant, ev.Data.Labels)
	}
	if resp, body := b.apiCall(t, "GET", "/v1/jobs/api-fail-r1", token, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET the retry: %d %s", resp.StatusCode, body)
	}
	resp, body = b.apiCall(t, "POST", "/v1/jobs/api-fail/cancel", token, nil)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(body), `"outcome":"terminal"`) {
		t.Errorf("cancel of an ended job: %d %s", resp.StatusCode, body)
	}
}

// TestAPIStopsWithOpenEventStream: a worker stopping while a client
// follows a job that has not ended closes the stream and returns, rather
// than waiting for the job.
func TestAPIStopsWithOpenEventStream(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// No worker serves video here: the job stays queued.
	stop := b.start(t, func(c *config.Config) { c.APIAddr, c.Kinds = "127.0.0.1:0", []string{"speech"} })
	token := b.apiKey(t, "acme")
	spec, _ := json.Marshal(videoSpec("api-open", "a stream left open"))
	if resp, body := b.apiCall(t, "POST", "/v1/jobs", token, spec); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	req, _ := http.NewRequestWithContext(testenv.Context(t, time.Minute), "GET", "http://"+b.ep.APIAddr+"/v1/jobs/api-open/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	stop()                                // fails the test when Run does not return
	_, _ = io.Copy(io.Discard, resp.Body) // ends once the worker closes the connection
	if req.Context().Err() != nil {
		t.Error("the event stream did not end when the worker stopped")
	}
}

// TestAPIRetryIDOfAnotherTenant: when another tenant's job already has
// the id a retry would take (<id>-r1, queued and never seen), the retry
// answers 409 id_taken instead of 202 with a job the key cannot see.
func TestAPIRetryIDOfAnotherTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// No worker serves speech here: globex's job stays queued.
	b.start(t, func(c *config.Config) { c.APIAddr, c.Kinds = "127.0.0.1:0", []string{"video"} })
	acme, globex := b.apiKey(t, "acme"), b.apiKey(t, "globex")
	spec, _ := json.Marshal(videoSpec("api-sq", "doomed [sim:fail=content_blocked]"))
	if resp, body := b.apiCall(t, "POST", "/v1/jobs", acme, spec); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	squat, _ := json.Marshal(speechSpec("api-sq-r1", "taken", "sync"))
	if resp, body := b.apiCall(t, "POST", "/v1/jobs", globex, squat); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("globex's submit: %d %s", resp.StatusCode, body)
	}
	if ev := b.await(t, "api-sq", time.Minute); ev.Data.Status != "failed" {
		t.Fatalf("api-sq ended %s", ev.Data.Status)
	}
	resp, body := b.apiCall(t, "POST", "/v1/jobs/api-sq/retry", acme, nil)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), `"code":"id_taken"`) {
		t.Errorf("retry onto globex's id: %d %s, want 409 id_taken", resp.StatusCode, body)
	}
}
