package worker_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestOperateFromTheCLI drives enqueue jobs, retry and dlq against a real
// worker: an operator finds the failed jobs, reads why, retries one (a new
// job X-r1 with retry_of: X), is stopped from paying twice for an
// ambiguous submission unless forced, replays and purges dead letters.
func TestOperateFromTheCLI(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	b.failJobsToOperate(t)

	t.Run("jobs lists the failed ones with their error codes", func(t *testing.T) { checkJobsListsFailed(t, b) })
	t.Run("retry needs force for an ambiguous submission, then succeeds", func(t *testing.T) { checkRetry(t, b) })
	t.Run("dlq list, show, replay and purge", func(t *testing.T) { checkDLQ(t, b) })
	t.Run("metrics and the listing agree", func(t *testing.T) { checkMetricsAgreeWithListing(t, b) })
}

// failJobsToOperate publishes the jobs TestOperateFromTheCLI's subtests
// operate on (most of them failed) and waits for each to end.
func (b *bundle) failJobsToOperate(t *testing.T) {
	t.Helper()
	// Two submissions whose answers are lost: submit_ambiguous, dead-lettered.
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error500AfterRate: 1})
	for _, id := range []string{"amb-retry", "amb-replay"} {
		b.publish(t, "video", id, videoSpec(id, "lost answer "+id))
	}
	for _, id := range []string{"amb-retry", "amb-replay"} {
		if ev := b.await(t, id, 60*time.Second); ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeSubmitAmbiguous {
			t.Fatalf("%s: %+v", id, ev.Data)
		}
	}
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{})
	b.publish(t, "video", "blocked", videoSpec("blocked", "no [sim:fail=blocked]"))
	b.await(t, "blocked", 60*time.Second)
	b.publish(t, "video", "fine", videoSpec("fine", "a fine one"))
	b.await(t, "fine", 60*time.Second)
	b.publish(t, "video", "bad-spec", `{"id":"bad-spec","kind":"video","video":{"model":"m"}}`)
	b.await(t, "bad-spec", 60*time.Second)
}

// checkJobsListsFailed is the subtest "jobs lists the failed ones with their error codes".
func checkJobsListsFailed(t *testing.T, b *bundle) {
	out, code := b.enqueue(t, "", "jobs", "--status", "failed", "--since", "1h")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	for _, want := range []string{"amb-retry", "amb-replay", "blocked", "bad-spec", "submit_ambiguous", "invalid_spec"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "fine") {
		t.Errorf("a succeeded job is listed as failed:\n%s", out)
	}
	out, code = b.enqueue(t, "", "jobs", "--json", "--label", "suite=e2e", "--limit", "2")
	var list jobclient.JobList
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || list.Matched != 4 || len(list.Jobs) != 2 {
		t.Fatalf("jobs --json --label --limit: exit %d, %+v\n%s", code, list, out)
	}
	if out, code := b.enqueue(t, "", "jobs", "--status", "lost"); code != 2 || !strings.Contains(out, "--status") {
		t.Errorf("bad --status: exit %d\n%s", code, out)
	}
}

// checkRetry is the subtest "retry needs force for an ambiguous submission, then succeeds".
func checkRetry(t *testing.T, b *bundle) {
	out, code := b.enqueue(t, "", "retry", "amb-retry")
	if code != 1 || !strings.Contains(out, "may pay twice") {
		t.Fatalf("retry without --force: exit %d\n%s", code, out)
	}
	out, code = b.enqueue(t, "", "retry", "amb-retry", "--force", "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "amb-retry-r1") || !strings.Contains(out, "succeeded") {
		t.Fatalf("retry --force --wait: exit %d\n%s", code, out)
	}
	rec := b.record(t, "amb-retry-r1")
	if rec.Labels["retry_of"] != "amb-retry" || rec.Labels["suite"] != "e2e" {
		t.Errorf("retry labels = %v", rec.Labels)
	}
	if b.record(t, "amb-retry").Status != state.StatusFailed {
		t.Error("the original's record changed")
	}
	if out, code := b.enqueue(t, "", "retry", "fine"); code != 1 || !strings.Contains(out, "succeeded") {
		t.Errorf("retry of a succeeded job: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "retry", "never-was"); code != 6 {
		t.Errorf("retry of an unknown job: exit %d\n%s", code, out)
	}
	out, code = b.enqueue(t, "", "retry", "blocked", "--json")
	var rep struct {
		Retries []jobclient.RetryResult `json:"retries"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Retries) != 1 || rep.Retries[0].RetryID != "blocked-r1" {
		t.Fatalf("retry --json: exit %d\n%s", code, out)
	}
	b.await(t, "blocked-r1", 60*time.Second)
	// A second retry is the next number, never the same id.
	if out, code := b.enqueue(t, "", "retry", "blocked"); code != 0 || !strings.Contains(out, "blocked-r2") {
		t.Errorf("second retry: exit %d\n%s", code, out)
	}
	b.await(t, "blocked-r2", 60*time.Second)
}

// checkDLQ is the subtest "dlq list, show, replay and purge".
func checkDLQ(t *testing.T, b *bundle) {
	out, code := b.enqueue(t, "", "dlq", "list")
	if code != 0 || !strings.Contains(out, "amb-replay") || !strings.Contains(out, "invalid_spec") {
		t.Fatalf("dlq list: exit %d\n%s", code, out)
	}
	out, code = b.enqueue(t, "", "dlq", "show", "bad-spec")
	if code != 0 || !strings.Contains(out, `{"id":"bad-spec","kind":"video","video":{"model":"m"}}`) {
		t.Fatalf("dlq show: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "dlq", "replay", "amb-replay"); code != 1 || !strings.Contains(out, "may pay twice") {
		t.Fatalf("replay of an ambiguous letter without --force: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "dlq", "replay", "bad-spec"); code != 1 || !strings.Contains(out, "invalid") {
		t.Fatalf("replay of an invalid spec: exit %d\n%s", code, out)
	}
	out, code = b.enqueue(t, "", "dlq", "replay", "amb-replay", "--force", "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "amb-replay-r1") {
		t.Fatalf("replay --force --wait: exit %d\n%s", code, out)
	}
	if out, _ := b.enqueue(t, "", "dlq", "list", "--json"); strings.Contains(out, `"amb-replay"`) {
		t.Errorf("a replayed letter stayed in the DLQ:\n%s", out)
	}
	if out, code := b.enqueue(t, "", "dlq", "purge", "--reason", "invalid_spec"); code != 2 || !strings.Contains(out, "not confirmed") {
		t.Fatalf("purge without confirmation: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "y\n", "dlq", "purge", "--reason", "invalid_spec"); code != 0 || !strings.Contains(out, "removed 1") {
		t.Fatalf("purge confirmed: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "dlq", "show", "bad-spec"); code != 6 {
		t.Errorf("show of a purged letter: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "dlq", "purge", "--all", "--yes", "--json"); code != 0 || !strings.Contains(out, `"purged"`) {
		t.Errorf("purge --all --yes: exit %d\n%s", code, out)
	}
	if out, code := b.enqueue(t, "", "dlq", "purge"); code != 2 || !strings.Contains(out, "--all") {
		t.Errorf("purge without a selection: exit %d\n%s", code, out)
	}
}

// checkMetricsAgreeWithListing is the subtest "metrics and the listing agree".
func checkMetricsAgreeWithListing(t *testing.T, b *bundle) {
	resp, err := http.Get("http://" + b.ep.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^sluice_jobs_total\{kind="video",status="failed"\} (\d+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no failed video jobs in /metrics:\n%s", body)
	}
	out, code := b.enqueue(t, "", "jobs", "--status", "failed", "--kind", "video", "--json", "--limit", "0")
	var list jobclient.JobList
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("jobs: exit %d\n%s", code, out)
	}
	if want, _ := strconv.Atoi(string(m[1])); list.Matched != want || want < 6 {
		t.Errorf("/metrics counts %d failed video jobs, the listing %d", want, list.Matched)
	}
}
