package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestBoundTenants (docs/tenants.md#who-may-act-for-a-tenant): acme is
// bound with max priority 2. Its jobs are accepted only from its tenant
// subject, at priority 2 or less urgent; a spec there naming another
// tenant is invalid; every refusal fails at validate, is dead-lettered
// and submits nothing. An unbound tenant's subject works too.
func TestBoundTenants(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	if out, code := b.enqueue(t, "", "tenants", "set", "acme", "--bound", "--max-priority", "2"); code != 0 {
		t.Fatalf("enqueue tenants set: exit %d: %s", code, out)
	}
	b.start(t)
	forged := nats.Header{}
	forged.Set(contract.HeaderTenantSubject, "acme")
	acme := contract.TenantSubject("video", "acme")
	jobs := []struct {
		id, subject, tenant string
		priority            int
		h                   nats.Header
		status              state.Status
		code, message       string
	}{
		{"plain-1", "sluice.jobs.video", "acme", 0, nil, state.StatusFailed, "tenant_refused", "tenant acme is bound"},
		{"forged-1", "sluice.jobs.video", "acme", 2, forged, state.StatusFailed, "tenant_refused", "tenant acme is bound"},
		{"urgent-1", acme, "", 1, nil, state.StatusFailed, "tenant_refused", "priority 1 is more urgent than tenant acme's limit of 2"},
		{"claim-1", acme, "other", 2, nil, state.StatusFailed, "invalid_spec", "tenant: must be acme"},
		{"bound-1", acme, "", 2, nil, state.StatusSucceeded, "", ""},
		{"bound-2", acme, "acme", 4, nil, state.StatusSucceeded, "", ""},
		{"other-1", contract.TenantSubject("video", "other"), "", 1, nil, state.StatusSucceeded, "", ""},
	}
	for _, j := range jobs {
		spec := videoSpec(j.id, "a bound harbour "+j.id)
		if j.tenant != "" {
			spec["tenant"] = j.tenant
		}
		if j.priority != 0 {
			spec["priority"] = j.priority
		}
		b.publishOn(t, j.subject, j.id, spec, j.h)
	}
	for _, j := range jobs {
		ev := b.await(t, j.id, time.Minute)
		e := ev.Data.Error
		switch {
		case ev.Data.Status != string(j.status):
			t.Errorf("%s: %s %+v, want %s", j.id, ev.Data.Status, e, j.status)
		case j.code != "" && (e == nil || e.Code != j.code || e.Stage != state.StageValidate || !strings.Contains(e.Message, j.message)):
			t.Errorf("%s: error %+v, want %s at validate naming %q", j.id, e, j.code, j.message)
		case j.code == "" && ev.Data.Tenant != tenantOf(j.subject):
			t.Errorf("%s: tenant %q, want the subject's", j.id, ev.Data.Tenant)
		}
		if n := b.media.SubmitCount("a bound harbour " + j.id); (j.code == "") != (n == 1) {
			t.Errorf("%s: %d tasks submitted", j.id, n)
		}
	}
	letters := map[string]string{}
	for _, m := range b.deadLetters(t) {
		letters[m.Header.Get(contract.HeaderJobID)] = m.Header.Get(contract.HeaderError)
	}
	for _, j := range jobs {
		if got := letters[j.id]; (j.code != "") != strings.HasPrefix(got, j.code+":") || j.code == "" && got != "" {
			t.Errorf("%s: dead letter %q, want one for %q", j.id, got, j.code)
		}
	}
}

func tenantOf(subject string) string {
	_, tenant, _ := contract.ParseTenantSubject(subject)
	return tenant
}

// TestBoundTenantPipeline: a pipeline on a bound tenant's subject
// publishes its steps on the tenant's subjects, where they are accepted;
// a step naming another bound tenant gets no such right and is refused,
// and the same pipeline on the plain subject is refused whole, with no
// step published.
func TestBoundTenantPipeline(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, tenant := range []string{"acme", "rival"} {
		if out, code := b.enqueue(t, "", "tenants", "set", tenant, "--bound"); code != 0 {
			t.Fatalf("enqueue tenants set: exit %d: %s", code, out)
		}
	}
	b.start(t, servePipelines)
	pipeline := func(id string, stepTenant string) map[string]any {
		second := speechSpec("", id+" second", "async")
		if stepTenant != "" {
			second["tenant"] = stepTenant
		}
		return map[string]any{"id": id, "kind": "pipeline", "pipeline": map[string]any{"steps": []any{
			pipelineStep("first", nil, speechSpec("", id+" first", "async")),
			pipelineStep("second", []string{"first"}, second),
		}}}
	}
	b.publishOn(t, contract.TenantSubject("pipeline", "acme"), "pl-bound", pipeline("pl-bound", ""), nil)
	b.publishOn(t, contract.TenantSubject("pipeline", "acme"), "pl-rival", pipeline("pl-rival", "rival"), nil)
	plain := pipeline("pl-plain", "")
	plain["tenant"] = "acme"
	b.publish(t, "pipeline", "pl-plain", plain)

	if ev := b.await(t, "pl-bound", time.Minute); ev.Data.Status != string(state.StatusSucceeded) || ev.Data.Tenant != "acme" {
		t.Errorf("pl-bound = %s (tenant %q) %+v, want succeeded for acme", ev.Data.Status, ev.Data.Tenant, ev.Data.Error)
	}
	if ev := b.await(t, "pl-rival", time.Minute); ev.Data.Status != string(state.StatusFailed) || stepsOf(t, ev)["second"].Error == nil ||
		stepsOf(t, ev)["second"].Error.Code != "tenant_refused" {
		t.Errorf("pl-rival = %s, steps %+v; want its second step refused", ev.Data.Status, stepsOf(t, ev))
	}
	if ev := b.await(t, "pl-plain", time.Minute); ev.Data.Error == nil || ev.Data.Error.Code != "tenant_refused" {
		t.Errorf("pl-plain = %s %+v, want failed tenant_refused", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("pl-plain first") + b.media.SubmitCount("pl-rival second"); n != 0 {
		t.Errorf("%d refused steps submitted", n)
	}
}

// TestEnqueueForBoundTenant: enqueue publishes a bound tenant's job on
// its tenant subject by itself (it reads the tenant's settings), a retry
// of a refused job too, and --as-tenant does so for any tenant, refusing
// a spec that names none.
func TestEnqueueForBoundTenant(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	if out, code := b.enqueue(t, "", "tenants", "set", "acme", "--bound"); code != 0 {
		t.Fatalf("enqueue tenants set: exit %d: %s", code, out)
	}
	b.start(t)
	video := []string{"video", "--model", "m", "--resolution", "768P", "--duration", "5", "--ratio", "16:9"}
	if out, code := b.enqueue(t, "", append(video, "--id", "cli-bound", "--prompt", "cli bound", "--tenant", "acme", "--wait", "--timeout", "60s")...); code != 0 {
		t.Fatalf("enqueue video --tenant acme: exit %d: %s", code, out)
	}
	refused := videoSpec("refused-1", "refused then retried")
	refused["tenant"] = "acme"
	b.publish(t, "video", "refused-1", refused)
	if ev := b.await(t, "refused-1", time.Minute); ev.Data.Error == nil || ev.Data.Error.Code != "tenant_refused" {
		t.Fatalf("refused-1 = %s %+v, want tenant_refused", ev.Data.Status, ev.Data.Error)
	}
	if out, code := b.enqueue(t, "", "retry", "refused-1", "--wait", "--timeout", "60s"); code != 0 {
		t.Fatalf("enqueue retry of a refused job: exit %d: %s", code, out)
	}
	if out, code := b.enqueue(t, "", append(video, "--id", "as-beta", "--prompt", "as beta", "--tenant", "beta", "--as-tenant", "--wait", "--timeout", "60s")...); code != 0 {
		t.Fatalf("enqueue video --as-tenant: exit %d: %s", code, out)
	}
	if out, code := b.enqueue(t, "", append(video, "--id", "as-none", "--prompt", "as none", "--as-tenant")...); code != 2 || !strings.Contains(out, "--as-tenant") {
		t.Errorf("--as-tenant without a tenant: exit %d, want 2 naming --as-tenant: %s", code, out)
	}
	for id, tenant := range map[string]string{"cli-bound": "acme", "refused-1-r1": "acme", "as-beta": "beta"} {
		if ev := b.await(t, id, time.Minute); ev.Data.Status != string(state.StatusSucceeded) || ev.Data.Tenant != tenant {
			t.Errorf("%s = %s for %q, want succeeded for %s", id, ev.Data.Status, ev.Data.Tenant, tenant)
		}
	}
}

// TestBindingATenantLive: a tenant bound while one of its jobs runs
// upstream refuses its new jobs from the plain subject, and the running
// job, delivered again to a worker that started after the binding, goes
// on to succeed with one paid submit.
func TestBindingATenantLive(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	stop := b.start(t)
	running := videoSpec("live-up", "upstream before binding [sim:duration=10m]")
	running["tenant"] = "acme"
	b.publish(t, "video", "live-up", running)
	b.awaitStatus(t, "live-up", state.StatusRunning, time.Minute)
	if out, code := b.enqueue(t, "", "tenants", "set", "acme", "--bound"); code != 0 {
		t.Fatalf("enqueue tenants set: exit %d: %s", code, out)
	}
	stop() // the job is handed back, and delivered again to a worker that knows acme is bound
	b.start(t)
	after := videoSpec("live-after", "after binding")
	after["tenant"] = "acme"
	b.publish(t, "video", "live-after", after)
	if ev := b.await(t, "live-after", time.Minute); ev.Data.Error == nil || ev.Data.Error.Code != "tenant_refused" {
		t.Errorf("live-after = %s %+v, want failed tenant_refused", ev.Data.Status, ev.Data.Error)
	}
	b.advanceMedia(time.Hour)
	if ev := b.await(t, "live-up", time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Errorf("live-up = %s %+v, want succeeded: it was upstream before its tenant was bound", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("upstream before binding [sim:duration=10m]"); n != 1 {
		t.Errorf("live-up submitted %d times, want once", n)
	}
}
