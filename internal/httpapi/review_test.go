package httpapi_test

import (
	"bufio"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/httpapi"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestIdempotencyKeyPerTenant: an Idempotency-Key binds one job for its
// tenant, whichever of the tenant's keys repeats it (a client retrying
// after the key was rotated pays once), and never another tenant's.
func TestIdempotencyKeyPerTenant(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	old := b.key(t, apikeys.Key{Tenant: "acme"})
	rotated := b.key(t, apikeys.Key{Tenant: "acme"})
	other := b.key(t, apikeys.Key{Tenant: "globex"})
	idem := map[string]string{"Idempotency-Key": "order-77"}
	var ids []string
	for _, token := range []string{old, rotated, other} {
		r := b.do(t, "POST", "/v1/jobs", token, videoSpec(""), idem)
		var acc struct {
			JobID string `json:"job_id"`
		}
		r.decode(t, &acc)
		if r.status != http.StatusAccepted {
			t.Fatalf("POST: %d %s", r.status, r.body)
		}
		ids = append(ids, acc.JobID)
	}
	if ids[0] != ids[1] {
		t.Errorf("the tenant's second key got job %s for order-77, want the first key's %s", ids[1], ids[0])
	}
	if ids[2] == ids[0] {
		t.Errorf("another tenant's order-77 answered acme's job %s", ids[0])
	}
	if n := b.jobsStored(t); n != 2 {
		t.Errorf("SLUICE_JOBS holds %d messages, want 2 (one per tenant)", n)
	}
}

// TestForeignIDNotTaken: a spec id that a job published on NATS for
// another tenant already has answers 409 id_taken, as an id claimed over
// HTTP does: the key learns no more, and does not come to own the id.
func TestForeignIDNotTaken(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	acme := b.key(t, apikeys.Key{Tenant: "acme"})
	sub, err := jobclient.NewSubmission([]byte(`{"id":"clip-7","tenant":"globex",`+string(videoSpec("")[1:])), nil, models.Shipped())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Publish(ctx(t), []jobclient.Submission{sub}, jobclient.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
	r := b.do(t, "POST", "/v1/jobs", acme, videoSpec("clip-7"), nil)
	if r.status != http.StatusConflict || problemOf(t, r)["code"] != "id_taken" {
		t.Errorf("POST of globex's clip-7 with acme's key: %d %s, want 409 id_taken", r.status, r.body)
	}
	if owner, err := b.keys.OwnerOf(ctx(t), "clip-7"); err != nil || owner != nil {
		t.Errorf("clip-7's owner %+v (%v), want none", owner, err)
	}
	if n := b.jobsStored(t); n != 1 {
		t.Errorf("SLUICE_JOBS holds %d messages, want 1", n)
	}
	for _, path := range []string{"/v1/jobs/clip-7", "/v1/jobs/clip-7/cancel"} {
		method := map[bool]string{true: "GET", false: "POST"}[path == "/v1/jobs/clip-7"]
		if r := b.do(t, method, path, acme, nil, nil); r.status != http.StatusNotFound {
			t.Errorf("%s %s with acme's key: %d %s, want 404", method, path, r.status, r.body)
		}
	}
}

// TestEventStreamEndsWhenKeyRevoked: an open event stream stops once its
// key is revoked, rather than following the job for as long as it runs.
func TestEventStreamEndsWhenKeyRevoked(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{KeepAlive: 50 * time.Millisecond})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	if r := b.do(t, "POST", "/v1/jobs", token, videoSpec("clip-1"), nil); r.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	req, err := http.NewRequestWithContext(testenv.Context(t, 30*time.Second), "GET", b.srv.URL+"/v1/jobs/clip-1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	if !lines.Scan() {
		t.Fatalf("no first line: %v", lines.Err())
	}
	id, _, _ := apikeys.SplitToken(token)
	if _, err := b.keys.Revoke(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	var tail []string
	for lines.Scan() {
		tail = append(tail, lines.Text())
	}
	if err := lines.Err(); err != nil {
		t.Fatalf("the stream of a revoked key did not end: %v", err)
	}
	if !strings.Contains(strings.Join(tail, "\n"), `"code":"unauthorized"`) {
		t.Errorf("the stream ended without saying why: %q", tail)
	}
}

// TestConcurrentIdenticalSubmits: identical POSTs at once, by spec id or
// by Idempotency-Key, all answer 202 with the same job and queue one
// message each.
func TestConcurrentIdenticalSubmits(t *testing.T) {
	t.Parallel()
	b := setupAPI(t, httpapi.Config{})
	token := b.key(t, apikeys.Key{Tenant: "acme"})
	for _, tt := range []struct {
		spec []byte
		hdr  map[string]string
	}{{videoSpec("clip-1"), nil}, {videoSpec(""), map[string]string{"Idempotency-Key": "order-1"}}} {
		ids := make(chan string, 8)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				r := b.do(t, "POST", "/v1/jobs", token, tt.spec, tt.hdr)
				var acc struct {
					JobID string `json:"job_id"`
				}
				r.decode(t, &acc)
				if r.status != http.StatusAccepted {
					t.Errorf("POST: %d %s", r.status, r.body)
				}
				ids <- acc.JobID
			})
		}
		wg.Wait()
		close(ids)
		seen := map[string]bool{}
		for id := range ids {
			seen[id] = true
		}
		if len(seen) != 1 {
			t.Errorf("identical POSTs answered jobs %v, want one", seen)
		}
	}
	if n := b.jobsStored(t); n != 2 {
		t.Errorf("SLUICE_JOBS holds %d messages, want 2", n)
	}
}
