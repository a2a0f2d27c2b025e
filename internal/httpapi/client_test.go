package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/httpapi/apiclienttest"
)

// validatingDoer sends a generated client's requests and checks each
// answer against the document (an event stream is passed through).
type validatingDoer struct {
	t *testing.T
	b *testBundle
}

func (d validatingDoer) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp, err
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	d.b.checkResponse(d.t, req.Method, req.URL.RequestURI(), body, resp, data)
	resp.Body = io.NopCloser(bytes.NewReader(data))
	return resp, nil
}

// generatedClient is the oapi-codegen client of the document, with key.
func (b *testBundle) generatedClient(t *testing.T, key string) *apiclienttest.ClientWithResponses {
	t.Helper()
	c, err := apiclienttest.NewClientWithResponses(b.srv.URL,
		apiclienttest.WithHTTPClient(validatingDoer{t: t, b: b}),
		apiclienttest.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+key)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGeneratedClientDrivesEveryEndpoint: a client generated from the
// document alone (oapi-codegen) reaches every endpoint and decodes every
// answer into the document's types.
func TestGeneratedClientDrivesEveryEndpoint(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	c := b.generatedClient(t, b.key(t, apikeys.Key{Tenant: "acme"}))
	ctx := ctx(t)

	doc, err := c.GetOpenAPIWithResponse(ctx)
	if err != nil || doc.StatusCode() != 200 {
		t.Fatalf("openapi: %v %v", err, doc)
	}
	idem := "order-1"
	sub, err := c.SubmitJobWithBodyWithResponse(ctx, &apiclienttest.SubmitJobParams{IdempotencyKey: &idem}, "application/json", bytes.NewReader(videoSpec("")))
	if err != nil || sub.JSON202 == nil {
		t.Fatalf("submit: %v %s", err, sub.Body)
	}
	id := sub.JSON202.JobId
	job, err := c.GetJobWithResponse(ctx, id)
	if err != nil || job.JSON200 == nil || job.JSON200.JobId != id {
		t.Fatalf("get: %v %s", err, job.Body)
	}
	limit := 10
	list, err := c.ListJobsWithResponse(ctx, &apiclienttest.ListJobsParams{Limit: &limit})
	if err != nil || list.JSON200 == nil {
		t.Fatalf("list: %v %s", err, list.Body)
	}
	retry, err := c.RetryJobWithResponse(ctx, id, nil)
	if err != nil || retry.ApplicationproblemJSON409 == nil || retry.ApplicationproblemJSON409.Code != "not_retryable" {
		t.Fatalf("retry of a queued job: %v %s", err, retry.Body)
	}
	cancel, err := c.CancelJobWithResponse(ctx, id)
	if err != nil || cancel.JSON202 == nil || cancel.JSON202.JobId != id {
		t.Fatalf("cancel: %v %s", err, cancel.Body)
	}
	missing, err := c.GetJobWithResponse(ctx, "no-such-job")
	if err != nil || missing.ApplicationproblemJSON404 == nil {
		t.Fatalf("get of a missing job: %v %s", err, missing.Body)
	}
	// The event stream of a job no worker took stays open: read its
	// opening comment, then leave.
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	resp, err := c.JobEvents(sctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || resp.StatusCode != 200 || !strings.HasPrefix(line, ": sluice events of "+id) {
		t.Errorf("events: %d %q %v", resp.StatusCode, line, err)
	}
}

// TestGeneratedClientIsCurrent: the generated client was made from the
// document as it is (go generate ./internal/httpapi/apiclienttest).
func TestGeneratedClientIsCurrent(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("apiclienttest/openapi.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(httpapi.Document())
	if got := hex.EncodeToString(sum[:]); got != strings.TrimSpace(string(want)) {
		t.Errorf("the generated client was made from another document (sha256 %s, the document's %s): run go generate ./internal/httpapi/apiclienttest", strings.TrimSpace(string(want)), got)
	}
}

// TestCurl: the docs' curl commands work as shown: submit, read, list and
// a refused key, each answer as documented.
func TestCurl(t *testing.T) {
	t.Parallel()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed: the curl examples are not run")
	}
	b := setupAPI(t, httpapi.Config{})
	key := b.key(t, apikeys.Key{Tenant: "acme"})
	run := func(args ...string) (status string, body []byte) {
		t.Helper()
		args = append([]string{"-sS", "-w", "\n%{http_code}", "-H", "Authorization: Bearer " + key}, args...)
		out, err := exec.CommandContext(ctx(t), curl, args...).Output()
		if err != nil {
			t.Fatalf("curl %v: %v", args, err)
		}
		i := bytes.LastIndexByte(out, '\n')
		return string(out[i+1:]), out[:i]
	}
	status, body := run("-X", "POST", b.srv.URL+"/v1/jobs", "-H", "Content-Type: application/json", "-H", "Idempotency-Key: order-77", "--data-binary", string(videoSpec("")))
	var acc struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(body, &acc); status != "202" || err != nil {
		t.Fatalf("submit: %s %s", status, body)
	}
	if status, body := run(b.srv.URL + "/v1/jobs/" + acc.JobID); status != "200" || !strings.Contains(string(body), `"status":"queued"`) {
		t.Errorf("get: %s %s", status, body)
	}
	if status, body := run(b.srv.URL + "/v1/jobs?kind=video&label=suite=api&limit=20"); status != "200" {
		t.Errorf("list: %s %s", status, body)
	}
	if status, body := run("-X", "POST", b.srv.URL+"/v1/jobs/"+acc.JobID+"/cancel"); status != "202" {
		t.Errorf("cancel: %s %s", status, body)
	}
	if status, body := run(b.srv.URL + "/v1/jobs?status=lost"); status != "400" || !strings.Contains(string(body), `"code":"invalid_parameter"`) {
		t.Errorf("a bad status: %s %s", status, body)
	}
}
