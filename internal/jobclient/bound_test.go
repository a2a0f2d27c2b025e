package jobclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/tenants"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// boundVideo is a video spec with id, and tenant unless it is "".
func boundVideo(id, tenant string) []byte {
	spec := map[string]any{"id": id, "kind": "video", "video": map[string]any{"model": "m", "input": map[string]any{"prompt": "p"},
		"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"}}}
	if tenant != "" {
		spec["tenant"] = tenant
	}
	data, _ := json.Marshal(spec)
	return data
}

// bindTenant writes tenant's settings as bound.
func bindTenant(ctx context.Context, t *testing.T, n *testenv.NATS, tenant string) {
	t.Helper()
	kv, err := n.JS.KeyValue(ctx, contract.TenantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	value, _ := json.Marshal(tenants.Settings{Bound: true})
	if _, err := kv.Put(ctx, tenants.TenantKey(tenant), value); err != nil {
		t.Fatal(err)
	}
}

// endJob stores id's record, ended failed with code for tenant, and its
// spec.
func endJob(ctx context.Context, t *testing.T, n *testenv.NATS, id, tenant, code string, spec []byte) {
	t.Helper()
	kv, err := n.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	_, err = state.NewStore(kv, "w", time.Now).UpdateNew(ctx, id, func(r *state.Record) error {
		*r = state.Record{JobID: id, Kind: "video", Tenant: tenant, Status: state.StatusFailed, Error: &state.Error{Code: code, Message: "m"}}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := n.JS.KeyValue(ctx, contract.SpecsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := state.NewSpecs(specs).Keep(ctx, id, spec); err != nil {
		t.Fatal(err)
	}
}

// subjectOf is the subject job id's message was published on, "" when
// none is in SLUICE_JOBS.
func subjectOf(ctx context.Context, t *testing.T, n *testenv.NATS, id string) string {
	t.Helper()
	s, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{contract.JobSubject("video"), contract.TenantSubject("video", "acme"), contract.TenantSubject("video", "default")} {
		m, err := s.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(contract.HeaderMsgID) == id {
			return subject
		}
	}
	return ""
}

// A job a bound tenant refused (tenant_refused: its author could not act
// for the tenant) is not moved onto the tenant's subject by a retry or a
// dead letter's replay that did not ask to act for the tenant: a user who
// may publish there (an operator replaying every letter, the console)
// would otherwise spend the tenant's budget on a spec someone else wrote.
// With AsTenant it is.
func TestRerunOfRefusedJobNeedsAsTenant(t *testing.T) {
	t.Parallel()
	n, ctx, _ := stateBucket(t)
	bindTenant(ctx, t, n, "acme")
	endJob(ctx, t, n, "forged", "acme", "tenant_refused", boundVideo("forged", "acme"))
	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := jc.Retry(ctx, "forged", jobclient.RetryOptions{}); !errors.Is(err, jobclient.ErrNotRetryable) {
		t.Errorf("retry of a refused job = %+v, %v; want ErrNotRetryable", res, err)
	}
	if s := subjectOf(ctx, t, n, "forged-r1"); s != "" {
		t.Errorf("the refused job's retry was published on %s", s)
	}
	m := nats.NewMsg(contract.DLQSubject("video"))
	m.Header.Set(contract.HeaderJobID, "forged")
	m.Header.Set(contract.HeaderError, "tenant_refused: tenant acme is bound")
	m.Data = boundVideo("forged", "acme")
	if _, err := n.JS.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	letters, err := jc.DeadLetters(ctx, jobclient.DLQFilter{WithData: true})
	if err != nil || len(letters) != 1 {
		t.Fatalf("letters = %+v, %v", letters, err)
	}
	for _, o := range []jobclient.RetryOptions{{}, {Force: true}} {
		if res, err := jc.Replay(ctx, letters[0], o); !errors.Is(err, jobclient.ErrNotRetryable) {
			t.Errorf("replay (force %v) of a refused job's letter = %+v, %v; want ErrNotRetryable", o.Force, res, err)
		}
	}
	if _, err := jc.Retry(ctx, "forged", jobclient.RetryOptions{AsTenant: true}); err != nil {
		t.Fatalf("retry of a refused job with AsTenant: %v", err)
	}
	if s := subjectOf(ctx, t, n, "forged-r1"); s != contract.TenantSubject("video", "acme") {
		t.Errorf("the retry with AsTenant was published on %q", s)
	}
}

// A bound tenant default is the tenant of every spec that names none:
// enqueue publishes such a spec, and its retry, on default's tenant
// subject, the only one its workers accept it from.
func TestBoundDefaultTenant(t *testing.T) {
	t.Parallel()
	n, ctx, _ := stateBucket(t)
	bindTenant(ctx, t, n, "default")
	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	sub := jobclient.Submission{ID: "plain-1", Kind: "video", Data: boundVideo("plain-1", "")}
	if res, err := jc.Publish(ctx, []jobclient.Submission{sub}, jobclient.PublishOptions{}); err != nil || res.Failed != 0 {
		t.Fatalf("publish = %+v, %v", res, err)
	}
	if s := subjectOf(ctx, t, n, "plain-1"); s != contract.TenantSubject("video", "default") {
		t.Errorf("a spec naming no tenant, default bound, was published on %q", s)
	}
	endJob(ctx, t, n, "old-1", "default", "upstream_failed", boundVideo("old-1", ""))
	if _, err := jc.Retry(ctx, "old-1", jobclient.RetryOptions{}); err != nil {
		t.Fatal(err)
	}
	if s := subjectOf(ctx, t, n, "old-1-r1"); s != contract.TenantSubject("video", "default") {
		t.Errorf("the retry of default's job was published on %q", s)
	}
}
