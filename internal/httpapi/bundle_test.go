package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// testBundle is one test's API: an embedded NATS set up as a worker sets
// it up, the key store, and the API served over HTTP.
type testBundle struct {
	nats    *testenv.NATS
	keys    *apikeys.Store
	client  *jobclient.Client
	srv     *httptest.Server
	val     validator.Validator
	logs    *testenv.SyncBuffer
	metrics *metrics.Metrics
}

// setupAPI starts NATS with the contract's streams and buckets and serves
// the API on a loopback port; cfg's Client, Keys, Logger and Metrics are
// filled in.
func setupAPI(t *testing.T, cfg httpapi.Config) *testBundle {
	t.Helper()
	ctx := testenv.Context(t, time.Minute)
	b := &testBundle{nats: testenv.StartNATS(t), logs: &testenv.SyncBuffer{}, metrics: metrics.New()}
	if err := contract.Ensure(ctx, b.nats.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(b.nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	if b.client, err = jobclient.New(nc, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.client.Close)
	if b.keys, err = b.client.APIKeys(ctx, false); err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(b.logs)
	cfg.Client, cfg.Keys, cfg.Logger, cfg.Metrics = b.client, b.keys, &log, b.metrics
	api, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = httptest.NewServer(api)
	t.Cleanup(b.srv.Close)
	b.val = documentValidator(t)
	return b
}

// documentValidator checks requests and responses against the served
// document.
func documentValidator(t *testing.T) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(httpapi.Document())
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		t.Fatalf("document: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		for _, e := range verrs {
			t.Errorf("document: %s: %s", e.Message, e.Reason)
		}
		t.FailNow()
	}
	return v
}

// key creates a key of tenant with k's limits and returns its token.
func (b *testBundle) key(t *testing.T, k apikeys.Key) string {
	t.Helper()
	token, _, err := b.keys.Create(testenv.Context(t, 10*time.Second), k)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// reply is an answer of the API.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// decode decodes the body into v.
func (r reply) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// do sends a request with token (none when empty) and checks the request
// and the response against the document.
func (b *testBundle) do(t *testing.T, method, path, token string, body []byte, header map[string]string) reply {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	req, err := http.NewRequestWithContext(ctx, method, b.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	b.checkResponse(t, method, path, body, resp, data)
	return reply{status: resp.StatusCode, header: resp.Header, body: data}
}

// checkResponse validates a response (its status, headers and body)
// against the document.
func (b *testBundle) checkResponse(t *testing.T, method, path string, body []byte, resp *http.Response, data []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://127.0.0.1:8080"+path, bytes.NewReader(body))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	check := &http.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(data)), Request: req}
	if ok, errs := b.val.ValidateHttpResponse(req, check); !ok {
		for _, e := range errs {
			t.Errorf("%s %s answered %d %s: not as documented: %s: %s %v", method, path, resp.StatusCode, strings.TrimSpace(string(data)), e.Message, e.Reason, e.SchemaValidationErrors)
		}
	}
}

// problemOf decodes a problem+json answer.
func problemOf(t *testing.T, r reply) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json (%s)", ct, r.body)
	}
	var p map[string]any
	r.decode(t, &p)
	return p
}

// jobsStored counts the messages in SLUICE_JOBS.
func (b *testBundle) jobsStored(t *testing.T) uint64 {
	t.Helper()
	return testenv.StoredMsgs(t, b.nats.JS, contract.JobsStream)
}

// lastJob returns the last message of SLUICE_JOBS.
func (b *testBundle) lastJob(t *testing.T) *nats.Msg {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	s, err := b.nats.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctx, contract.JobsSubjectPrefix+">")
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(m.Subject)
	msg.Header, msg.Data = m.Header, m.Data
	return msg
}

func videoSpec(id string) []byte {
	spec := map[string]any{
		"kind": "video", "labels": map[string]string{"suite": "api"},
		"video": map[string]any{
			"model":      "video-model",
			"input":      map[string]any{"prompt": "a paper boat"},
			"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
		},
	}
	if id != "" {
		spec["id"] = id
	}
	data, _ := json.Marshal(spec)
	return data
}

// ctx is a short test context.
func ctx(t *testing.T) context.Context { return testenv.Context(t, 30*time.Second) }

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }
