package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/cli"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestKeysRefused: a missing, malformed, unknown, wrong or revoked key is
// answered 401 as problem+json and nothing is published; the log names
// no key.
func TestKeysRefused(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	good := b.key(t, apikeys.Key{Tenant: "acme"})
	revoked := b.key(t, apikeys.Key{Tenant: "acme"})
	id, _, _ := apikeys.SplitToken(revoked)
	if _, err := b.keys.Revoke(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	goodID, _, _ := apikeys.SplitToken(good)
	tests := map[string]string{
		"missing":   "",
		"malformed": "not-a-key",
		"unknown":   "sluice_000000000000_secret",
		"wrong":     "sluice_" + goodID + "_wrong-secret",
		"revoked":   revoked,
	}
	for name, token := range tests {
		t.Run(name, func(t *testing.T) {
			r := b.do(t, "POST", "/v1/jobs", token, videoSpec("clip-1"), nil)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", r.status, r.body)
			}
			if p := problemOf(t, r); p["code"] != "unauthorized" {
				t.Errorf("code %v, want unauthorized", p["code"])
			}
		})
	}
	if n := b.jobsStored(t); n != 0 {
		t.Errorf("SLUICE_JOBS holds %d messages after refused submits, want 0", n)
	}
	for _, token := range []string{good, revoked} {
		if _, secret, _ := apikeys.SplitToken(token); strings.Contains(b.logs.String(), secret) {
			t.Errorf("the log holds a key's secret")
		}
	}
}

// TestSubmitPublishesForTheKeysTenant: a valid spec is answered 202 with
// the job's id, status and links, and published on the key's tenant
// subject with Nats-Msg-Id = the job id and the tenant written into it;
// the request is logged and counted with the key's id.
func TestSubmitPublishesForTheKeysTenant(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	keyID, _, _ := apikeys.SplitToken(token)

	r := b.do(t, "POST", "/v1/jobs", token, videoSpec("clip-1"), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("status %d, want 202: %s", r.status, r.body)
	}
	var acc struct {
		JobID  string `json:"job_id"`
		Status string `json:"status"`
		Links  struct {
			Self string `json:"self"`
		} `json:"links"`
	}
	r.decode(t, &acc)
	if acc.JobID != "clip-1" || acc.Status != "queued" || acc.Links.Self != "/v1/jobs/clip-1" || r.header.Get("Location") != "/v1/jobs/clip-1" {
		t.Errorf("answer %s, Location %q", r.body, r.header.Get("Location"))
	}
	m := b.lastJob(t)
	if m.Subject != "sluice.jobs.video.t.acme" || m.Header.Get("Nats-Msg-Id") != "clip-1" {
		t.Errorf("published on %s with Nats-Msg-Id %q, want sluice.jobs.video.t.acme and clip-1", m.Subject, m.Header.Get("Nats-Msg-Id"))
	}
	var spec struct {
		Tenant string `json:"tenant"`
	}
	if err := json.Unmarshal(m.Data, &spec); err != nil || spec.Tenant != "acme" {
		t.Errorf("published spec's tenant %q (%v), want acme", spec.Tenant, err)
	}
	g := b.do(t, "GET", "/v1/jobs/clip-1", token, nil, nil)
	if g.status != http.StatusOK || !strings.Contains(string(g.body), `"status":"queued"`) {
		t.Errorf("GET: %d %s", g.status, g.body)
	}
	if !strings.Contains(b.logs.String(), `"key_id":"`+keyID+`"`) {
		t.Errorf("no log line names key %s:\n%s", keyID, b.logs.String())
	}
	if strings.Contains(b.logs.String(), token) {
		t.Error("the log holds the key")
	}
}

// TestSubmitIdempotent: a repeated POST of the same spec id, or with the
// same Idempotency-Key, answers the same job and queues one message.
func TestSubmitIdempotent(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	other := b.key(t, apikeys.Key{Tenant: "globex"})

	var ids []string
	for range 2 {
		r := b.do(t, "POST", "/v1/jobs", token, videoSpec("clip-1"), nil)
		var acc struct {
			JobID     string `json:"job_id"`
			Duplicate bool   `json:"duplicate"`
		}
		r.decode(t, &acc)
		ids = append(ids, acc.JobID)
		if r.status != http.StatusAccepted || acc.Duplicate != (len(ids) == 2) {
			t.Errorf("POST %d: %d %s", len(ids), r.status, r.body)
		}
	}
	for range 2 {
		r := b.do(t, "POST", "/v1/jobs", token, videoSpec(""), map[string]string{"Idempotency-Key": "order-77"})
		var acc struct {
			JobID string `json:"job_id"`
		}
		r.decode(t, &acc)
		ids = append(ids, acc.JobID)
	}
	if ids[0] != ids[1] || ids[2] != ids[3] || ids[2] == "" {
		t.Errorf("ids %v: want the same job for the same id and the same Idempotency-Key", ids)
	}
	if n := b.jobsStored(t); n != 2 {
		t.Errorf("SLUICE_JOBS holds %d messages, want 2", n)
	}
	// Another tenant cannot take the id, nor learn more than that.
	r := b.do(t, "POST", "/v1/jobs", other, videoSpec("clip-1"), nil)
	if r.status != http.StatusConflict || problemOf(t, r)["code"] != "id_taken" {
		t.Errorf("another tenant's POST of clip-1: %d %s", r.status, r.body)
	}
}

// TestInvalidSpecAsTheCLI: an invalid spec is answered 422 invalid_spec
// with the very message `enqueue submit` prints, field by field, and
// nothing is published.
func TestInvalidSpecAsTheCLI(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	bad := []byte(`{"id":"clip-9","kind":"video","video":{"model":"video-model","input":{"prompt":"x"},"parameters":{"resolution":"768P","duration":7,"ratio":"16:10"}}}`)

	r := b.do(t, "POST", "/v1/jobs", token, bad, nil)
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422: %s", r.status, r.body)
	}
	var p struct {
		Code     string `json:"code"`
		Detail   string `json:"detail"`
		Problems []struct {
			Path, Rule string
		} `json:"problems"`
	}
	r.decode(t, &p)
	if p.Code != "invalid_spec" || len(p.Problems) == 0 || p.Problems[0].Path != "video.parameters.ratio" {
		t.Errorf("problem %s", r.body)
	}
	var out, errs bytes.Buffer
	env := cli.Env{Stdin: bytes.NewReader(bad), Stdout: &out, Stderr: &errs, Getenv: func(string) string { return "" },
		IsTerminal: func(io.Writer) bool { return false }, Now: time.Now, Rand: strings.NewReader(strings.Repeat("x", 64))}
	if code := cli.Run(testenv.Context(t, 30*time.Second), []string{"submit", "-f", "-", "--nats-url", b.nats.URL}, env); code != 2 {
		t.Fatalf("enqueue submit exit %d, want 2: %s %s", code, out.String(), errs.String())
	}
	if !strings.Contains(errs.String()+out.String(), p.Detail) {
		t.Errorf("the CLI says\n%s\nthe API's detail is\n%s", errs.String()+out.String(), p.Detail)
	}
	if n := b.jobsStored(t); n != 0 {
		t.Errorf("SLUICE_JOBS holds %d messages, want 0", n)
	}
}

// TestKeyLimitsRefused: a kind the key may not submit, a priority more
// urgent than it may ask and another tenant named in the spec are refused
// before anything is published.
func TestKeyLimitsRefused(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme", Kinds: []string{"speech"}, MaxPriority: 2})
	speech := func(extra string) []byte {
		return []byte(`{"kind":"speech"` + extra + `,"speech":{"model":"speech-model","input":{"text":"hi","voice":"alloy"}}}`)
	}
	tests := map[string]struct {
		body   []byte
		status int
		code   string
	}{
		"kind":     {videoSpec("v-1"), http.StatusForbidden, "tenant_refused"},
		"priority": {speech(`,"priority":1`), http.StatusForbidden, "tenant_refused"},
		"tenant":   {speech(`,"tenant":"globex"`), http.StatusUnprocessableEntity, "invalid_spec"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			r := b.do(t, "POST", "/v1/jobs", token, tt.body, nil)
			if r.status != tt.status || problemOf(t, r)["code"] != tt.code {
				t.Errorf("%d %s, want %d %s", r.status, r.body, tt.status, tt.code)
			}
		})
	}
	if n := b.jobsStored(t); n != 0 {
		t.Errorf("SLUICE_JOBS holds %d messages, want 0", n)
	}
	if r := b.do(t, "POST", "/v1/jobs", token, speech(`,"priority":2`), nil); r.status != http.StatusAccepted {
		t.Errorf("an allowed speech job: %d %s", r.status, r.body)
	}
}

// TestOtherTenantsJobIsNotFound: a key sees, cancels and retries its
// tenant's jobs only: another tenant's job answers 404 like a missing one.
func TestOtherTenantsJobIsNotFound(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	acme := b.key(t, apikeys.Key{Tenant: "acme"})
	globex := b.key(t, apikeys.Key{Tenant: "globex"})
	if r := b.do(t, "POST", "/v1/jobs", acme, videoSpec("clip-1"), nil); r.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	for _, tt := range []struct{ method, path string }{
		{"GET", "/v1/jobs/clip-1"}, {"POST", "/v1/jobs/clip-1/cancel"}, {"POST", "/v1/jobs/clip-1/retry"},
		{"GET", "/v1/jobs/clip-1/events"}, {"GET", "/v1/jobs/no-such-job"},
	} {
		r := b.do(t, tt.method, tt.path, globex, nil, nil)
		if r.status != http.StatusNotFound || problemOf(t, r)["code"] != "no_such_job" {
			t.Errorf("%s %s with another tenant's key: %d %s", tt.method, tt.path, r.status, r.body)
		}
	}
	var page struct {
		Jobs []any `json:"jobs"`
	}
	b.do(t, "GET", "/v1/jobs", globex, nil, nil).decode(t, &page)
	if len(page.Jobs) != 0 {
		t.Errorf("another tenant lists %d jobs, want 0", len(page.Jobs))
	}
}

// TestRateLimit: a key over its rate is answered 429 with Retry-After.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme", Rate: 0.01})
	first := b.do(t, "GET", "/v1/jobs/x", token, nil, nil)
	if first.status != http.StatusNotFound {
		t.Fatalf("first request: %d %s", first.status, first.body)
	}
	r := b.do(t, "GET", "/v1/jobs/x", token, nil, nil)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || problemOf(t, r)["code"] != "rate_limited" {
		t.Errorf("second request: %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
}

// TestDocumentServedAndCurrent: /v1/openapi.json is the document built
// from openapi/api.json and docs/schema (go generate is up to date).
func TestDocumentServedAndCurrent(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	r := b.do(t, "GET", "/v1/openapi.json", "", nil, nil)
	if r.status != http.StatusOK || !bytes.Equal(r.body, httpapi.Document()) {
		t.Errorf("GET /v1/openapi.json: %d, %d bytes", r.status, len(r.body))
	}
	var parts [3][]byte
	for i, f := range []string{"openapi/api.json", "../../docs/schema/jobspec.schema.json", "../../docs/schema/event.schema.json"} {
		data, err := readFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parts[i] = data
	}
	want, err := httpapi.BuildDocument(parts[0], parts[1], parts[2])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, httpapi.Document()) {
		t.Error("openapi.json is not what go generate ./internal/httpapi writes: run it")
	}
}

// TestClaimWithoutPublishIsCompleted: an API that died after claiming a
// job's id and before publishing it loses no job: the repeated POST
// publishes it (once) and answers it.
func TestClaimWithoutPublishIsCompleted(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	keyID, _, _ := apikeys.SplitToken(token)
	if _, _, err := b.keys.Claim(ctx(t), "clip-1", "acme", keyID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if r := b.do(t, "POST", "/v1/jobs", token, videoSpec("clip-1"), nil); r.status != http.StatusAccepted {
			t.Fatalf("repeated POST: %d %s", r.status, r.body)
		}
	}
	if n := b.jobsStored(t); n != 1 {
		t.Errorf("SLUICE_JOBS holds %d messages, want 1", n)
	}
	owner, err := b.keys.OwnerOf(ctx(t), "clip-1")
	if err != nil || owner == nil || !owner.Published {
		t.Errorf("owner %+v (%v), want published", owner, err)
	}
}

// TestRequestsCountedByKeyID: /metrics counts every request by route,
// status and key id, never the key.
func TestRequestsCountedByKeyID(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	keyID, _, _ := apikeys.SplitToken(token)
	b.do(t, "GET", "/v1/jobs/none", token, nil, nil)
	b.do(t, "GET", "/v1/jobs/none", "", nil, nil)
	rec := httptest.NewRecorder()
	b.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, want := range []string{
		`sluice_api_requests_total{key="` + keyID + `",route="GET /v1/jobs/{id}",status="404"} 1`,
		`sluice_api_requests_total{key="none",route="GET /v1/jobs/{id}",status="401"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, token) {
		t.Error("/metrics holds the key")
	}
}

// TestParametersCheckedByTheDocument: a request's path, query and header
// parameters are checked against the document: 400 invalid_parameter
// naming the parameter.
func TestParametersCheckedByTheDocument(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	for _, tt := range []struct{ path, want string }{
		{"/v1/jobs?limit=0", "limit"},
		{"/v1/jobs?status=lost", "status"},
		{"/v1/jobs?kind=audio", "kind"},
		{"/v1/jobs/bad%20id", "id"},
	} {
		r := b.do(t, "GET", tt.path, token, nil, nil)
		if r.status != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", tt.path, r.status, r.body)
			continue
		}
		if p := problemOf(t, r); p["code"] != "invalid_parameter" || !strings.Contains(p["detail"].(string), tt.want) {
			t.Errorf("GET %s: %s, want invalid_parameter naming %s", tt.path, r.body, tt.want)
		}
	}
	r := b.do(t, "POST", "/v1/jobs", token, videoSpec(""), map[string]string{"Idempotency-Key": strings.Repeat("k", 256)})
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "Idempotency-Key") {
		t.Errorf("a 256-byte Idempotency-Key: %d %s", r.status, r.body)
	}
}

// TestEventStreamResumes: a job's event stream sends its events from the
// first, ends after the terminal one, and a client that comes back with
// Last-Event-ID gets only the events after it.
func TestEventStreamResumes(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	if r := b.do(t, "POST", "/v1/jobs", token, videoSpec("clip-1"), nil); r.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	for _, status := range []string{"submitted", "running", "succeeded"} {
		ev := events.Event{SpecVersion: "1.0", ID: "clip-1." + status, Source: "sluice/worker", Type: "sluice.job." + status,
			Subject: "clip-1", Time: time.Now().UTC().Format(time.RFC3339Nano), DataContentType: "application/json",
			Data: events.Data{JobID: "clip-1", Kind: "video", Status: status, Tenant: "acme"}}
		data, _ := json.Marshal(ev)
		m := nats.NewMsg(contract.EventSubject("video", status))
		m.Data = data
		m.Header.Set(contract.HeaderMsgID, ev.ID)
		if _, err := b.nats.JS.PublishMsg(ctx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	for lastID, want := range map[string]string{"": "submitted,running,succeeded", "clip-1.submitted": "running,succeeded"} {
		r := b.do(t, "GET", "/v1/jobs/clip-1/events", token, nil, map[string]string{"Last-Event-ID": lastID})
		var got []string
		for _, line := range strings.Split(string(r.body), "\n") {
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				got = append(got, name)
			}
		}
		if strings.Join(got, ",") != want {
			t.Errorf("Last-Event-ID %q: events %v, want %s", lastID, got, want)
		}
	}
}
