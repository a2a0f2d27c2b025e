package worker_test

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/tenants"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// tenantVideo is a 5-second 768P video job of tenant.
func tenantVideo(id, tenant string) map[string]any {
	spec := videoSpec(id, "a budgeted harbour "+id)
	spec["tenant"] = tenant
	return spec
}

// TestBudgets: at 1 credit per second of 768P video, a tenant with a
// budget of 17 credits a month gets 3 five-second jobs submitted and the
// 4th, which the 2 credits left do not cover, waits for budget in the
// runner (the scheduler still starts it: the budget is not spent), nothing
// submitted and no delivery spent; a tenant
// whose budget covers one job and whose on_budget is fail gets its 2nd
// job failed budget_exhausted at submit. enqueue spend shows what the
// terminal events' costs sum to.
func TestBudgets(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, args := range [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "acme", "--budget", "17", "--per", "month"},
		{"tenants", "set", "frugal", "--budget", "5", "--per", "day", "--on-budget", "fail"},
	} {
		if out, code := b.enqueue(t, "", args...); code != 0 {
			t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
		}
	}
	b.start(t)

	for _, id := range []string{"acme-1", "acme-2", "acme-3", "frugal-1"} {
		tenant, _, _ := strings.Cut(id, "-")
		b.publish(t, "video", id, tenantVideo(id, tenant))
	}
	for _, id := range []string{"acme-1", "acme-2", "acme-3", "frugal-1"} {
		ev := b.await(t, id, time.Minute)
		if ev.Data.Status != string(state.StatusSucceeded) || ev.Data.Cost == nil || *ev.Data.Cost != 5 || ev.Data.Priority != 3 {
			t.Fatalf("%s = %s, cost %v, priority %d; want succeeded at 5 credits, priority 3", id, ev.Data.Status, ev.Data.Cost, ev.Data.Priority)
		}
	}

	b.publish(t, "video", "acme-4", tenantVideo("acme-4", "acme"))
	b.publish(t, "video", "frugal-2", tenantVideo("frugal-2", "frugal"))
	ev := b.await(t, "frugal-2", time.Minute)
	if e := ev.Data.Error; ev.Data.Status != string(state.StatusFailed) || e == nil || e.Code != "budget_exhausted" || e.Stage != state.StageSubmit {
		t.Fatalf("frugal-2 = %s %+v, want failed budget_exhausted at submit", ev.Data.Status, ev.Data.Error)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		rec := b.record(t, "acme-4")
		if rec != nil && rec.LastError != nil && strings.Contains(rec.LastError.Message, "waiting for budget: tenant acme spent 15 of 17 credits this month") {
			if rec.BudgetWaits < 1 || rec.Submits != 0 || rec.Status.Terminal() {
				t.Fatalf("acme-4 record: budget waits %d, submits %d, status %s", rec.BudgetWaits, rec.Submits, rec.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme-4 never showed it waits for budget: %+v", rec)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range []string{"acme-4", "frugal-2"} {
		if n := b.media.SubmitCount("a budgeted harbour " + id); n != 0 {
			t.Errorf("%s: %d tasks submitted, want none", id, n)
		}
	}

	var costs float64
	for _, ev := range b.events(t) {
		if state.Status(ev.Data.Status).Terminal() && ev.Data.Cost != nil {
			costs += *ev.Data.Cost
		}
	}
	out, code := b.enqueue(t, "", "spend", "--json")
	var spend struct {
		Spend []struct {
			Key     string
			Credits float64
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &spend) != nil {
		t.Fatalf("enqueue spend: exit %d: %s", code, out)
	}
	var total float64
	for _, s := range spend.Spend {
		total += s.Credits
	}
	if costs != 20 || math.Abs(total-costs) > 1e-9 {
		t.Errorf("enqueue spend totals %v, the terminal events' costs %v; want both 20", total, costs)
	}
	checkTenantListing(t, b)
}

// checkTenantListing: enqueue jobs --tenant lists only that tenant's
// jobs, and enqueue status shows a job's tenant, priority and cost.
func checkTenantListing(t *testing.T, b *bundle) {
	t.Helper()
	out, code := b.enqueue(t, "", "jobs", "--tenant", "frugal", "--json")
	var list struct {
		Jobs []struct {
			ID     string `json:"job_id"`
			Tenant string `json:"tenant"`
		}
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("enqueue jobs --tenant: exit %d: %s", code, out)
	}
	var ids []string
	for _, j := range list.Jobs {
		ids = append(ids, j.ID+"/"+j.Tenant)
	}
	if got := strings.Join(ids, ","); got != "frugal-2/frugal,frugal-1/frugal" {
		t.Errorf("enqueue jobs --tenant frugal = %s, want frugal-2 and frugal-1", got)
	}
	out, code = b.enqueue(t, "", "status", "acme-1")
	for _, want := range []string{"tenant     acme", "priority   3", "cost       5 credits"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("enqueue status acme-1 lacks %q: exit %d\n%s", want, code, out)
		}
	}
}

// TestSchedulerMarker: with nothing in SLUICE_TENANTS, a default job
// writes nothing there (no price table: no reservation, no cost; the key
// beside the tenants' is the model catalog the worker publishes), and
// the first job of another priority writes the scheduler marker.
func TestSchedulerMarker(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	ctx := testenv.Context(t, time.Minute)
	b.publish(t, "video", "plain-1", videoSpec("plain-1", "a plain harbour"))
	if ev := b.await(t, "plain-1", time.Minute); ev.Data.Status != string(state.StatusSucceeded) || ev.Data.Cost != nil || ev.Data.Tenant != "default" {
		t.Fatalf("plain-1 = %s, cost %v, tenant %q; want succeeded without a cost, tenant default", ev.Data.Status, ev.Data.Cost, ev.Data.Tenant)
	}
	kv, err := b.nats.JS.KeyValue(ctx, contract.TenantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(ctx, tenants.SchedulerKey); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("a default job wrote the marker: %v", err)
	}
	urgent := videoSpec("urgent-1", "an urgent harbour")
	urgent["priority"] = 1
	b.publish(t, "video", "urgent-1", urgent)
	if ev := b.await(t, "urgent-1", time.Minute); ev.Data.Priority != 1 {
		t.Fatalf("urgent-1 priority = %d, want 1", ev.Data.Priority)
	}
	if _, err := kv.Get(ctx, tenants.SchedulerKey); err != nil {
		t.Errorf("the marker after a priority-1 job: %v", err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		if k != tenants.SchedulerKey && k != models.Key {
			t.Errorf("unexpected key %s in %s", k, contract.TenantsBucket)
		}
	}
}

// TestBudgetWaitIsShown: a job waiting for its tenant's budget says so
// wherever a user looks — enqueue status, status --json (waiting_for),
// enqueue jobs --tenant (which lists it though it has no event yet) and
// the console's job page (with its spec as published). acme-w waits in
// the runner (4 credits left, it needs 5); spent-w waits before any worker
// takes it, its tenant's budget reached by spent-1.
func TestBudgetWaitIsShown(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	for _, args := range [][]string{{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "acme", "--budget", "4"}, {"tenants", "set", "spent", "--budget", "5"}} {
		b.enqueueOut(t, args...)
	}
	b.start(t)
	b.publish(t, "video", "spent-1", tenantVideo("spent-1", "spent"))
	if ev := b.await(t, "spent-1", time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("spent-1 = %s", ev.Data.Status)
	}
	for _, j := range []struct{ id, tenant string }{{"acme-w", "acme"}, {"spent-w", "spent"}} {
		b.publish(t, "video", j.id, tenantVideo(j.id, j.tenant))
		awaitBudgetWait(t, b, j.id)
		var js struct {
			WaitingFor string `json:"waiting_for"`
		}
		if out := b.enqueueOut(t, "status", "--json", j.id); json.Unmarshal([]byte(out), &js) != nil || js.WaitingFor != "budget" {
			t.Errorf("status --json %s: waiting_for %q, want budget: %s", j.id, js.WaitingFor, out)
		}
		if out := b.enqueueOut(t, "jobs", "--tenant", j.tenant); !strings.Contains(out, j.id) {
			t.Errorf("enqueue jobs --tenant %s does not list the waiting job:\n%s", j.tenant, out)
		}
		var shown struct {
			Tenants []struct {
				WaitingForBudget bool `json:"waiting_for_budget"`
				BudgetReached    bool `json:"budget_reached"`
			}
		}
		if out := b.enqueueOut(t, "tenants", "show", j.tenant, "--json"); json.Unmarshal([]byte(out), &shown) != nil ||
			len(shown.Tenants) != 1 || !shown.Tenants[0].WaitingForBudget || shown.Tenants[0].BudgetReached != (j.tenant == "spent") {
			t.Errorf("tenants show %s: %s; want waiting_for_budget true, budget_reached %v", j.tenant, out, j.tenant == "spent")
		}
		resp, err := http.Get("http://" + b.ep.HTTPAddr + "/console/jobs/" + j.id)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{"waiting for budget", "a budgeted harbour " + j.id} {
			if !strings.Contains(string(page), want) {
				t.Errorf("the console's page of %s lacks %q", j.id, want)
			}
		}
		for _, wrong := range []string{"No worker has seen", "no longer kept"} {
			if strings.Contains(string(page), wrong) {
				t.Errorf("the console's page of %s says %q", j.id, wrong)
			}
		}
	}
	checkConsoleTenantFilter(t, b)
}

// checkConsoleTenantFilter: the console's jobs list filters on a tenant
// (its jobs waiting for budget included), the Tenants page links each
// tenant to it, and the job page shows the job's tenant and priority.
func checkConsoleTenantFilter(t *testing.T, b *bundle) {
	t.Helper()
	get := func(path string) string {
		resp, err := http.Get("http://" + b.ep.HTTPAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		page, _ := io.ReadAll(resp.Body)
		return string(page)
	}
	list := get("/console/?tenant=acme")
	if !strings.Contains(list, `data-id="acme-w"`) || strings.Contains(list, `data-id="spent-1"`) {
		t.Errorf("/console/?tenant=acme does not list only acme's jobs")
	}
	if !strings.Contains(get("/console/tenants"), `href="/console/?tenant=acme"`) {
		t.Error("the Tenants page does not link acme to its jobs")
	}
	if page := get("/console/jobs/spent-1"); !strings.Contains(page, "<dt>tenant</dt><dd>spent</dd>") ||
		!strings.Contains(page, "<dt>priority</dt><dd>3</dd>") || !strings.Contains(page, "<dt>cost</dt><dd>5 credits</dd>") {
		t.Error("the job page of spent-1 lacks its tenant, priority or cost")
	}
}

// awaitBudgetWait waits until enqueue status says job id waits for
// budget; only a job that never says so gets to the deadline.
func awaitBudgetWait(t *testing.T, b *bundle, id string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out := b.enqueueOut(t, "status", id)
		if strings.Contains(out, "waiting for budget") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("enqueue status %s never says it waits for budget:\n%s", id, out)
		}
	}
}

// enqueueOut runs enqueue with args and returns its output, failing the
// test on a non-zero exit.
func (b *bundle) enqueueOut(t *testing.T, args ...string) string {
	t.Helper()
	out, code := b.enqueue(t, "", args...)
	if code != 0 {
		t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
	}
	return out
}
