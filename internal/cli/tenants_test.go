package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/tenants"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// enqueueOn runs the CLI against the NATS server at url.
func enqueueOn(ctx context.Context, url string, args ...string) (code int, stdout, stderr string) {
	var out, errs bytes.Buffer
	env := Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs,
		Getenv:     func(k string) string { return map[string]string{"SLUICE_NATS_URL": url}[k] },
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now,
		Rand:       strings.NewReader(strings.Repeat("x", 64)),
	}
	code = Run(ctx, args, env)
	return code, out.String(), errs.String()
}

func TestTenantsAndPrices(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.TenantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys := func() int {
		ks, _ := kv.ListKeys(ctx)
		count := 0
		for range ks.Keys() {
			count++
		}
		return count
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"tenants", "set", "acme", "--weight", "-1"}, "--weight"},
		{[]string{"tenants", "set", "acme", "--weight", "0"}, "--weight"},
		{[]string{"tenants", "set", "acme", "--budget", "-5"}, "--budget"},
		{[]string{"tenants", "set", "acme", "--per", "day"}, "--per: needs --budget"},
		{[]string{"tenants", "set", "acme", "--budget", "5", "--per", "year"}, "--per"},
		{[]string{"tenants", "set", "acme", "--max-tasks", "audio=3"}, "max-tasks"},
		{[]string{"tenants", "set", "acme", "--max-tasks", "video=-3"}, "max-tasks"},
		{[]string{"tenants", "set", "acme", "--on-budget", "drop"}, "--on-budget"},
		{[]string{"tenants", "set", "team a", "--weight", "2"}, "TENANT"},
		{[]string{"tenants", "set", "acme"}, "nothing to set"},
		{[]string{"prices", "set", "video.4K.second=1"}, "names no known unit"},
		{[]string{"prices", "set", "speech.char=-1"}, "0 or more"},
		{[]string{"spend", "--by", "label:"}, "label key"},
		{[]string{"spend", "--by", "team"}, "--by"},
	}
	for _, tt := range bad {
		code, _, stderr := enqueueOn(ctx, n.URL, tt.args...)
		if code != ExitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming %q", tt.args, code, stderr, ExitUsage, tt.want)
		}
	}
	if k := keys(); k != 0 {
		t.Fatalf("bad input wrote %d keys", k)
	}

	for _, args := range [][]string{
		{"tenants", "set", "acme", "--weight", "3", "--max-tasks", "video=4"},
		{"tenants", "set", "acme", "--budget", "100", "--per", "week", "--on-budget", "fail"},
		{"prices", "set", "video.768P.second=0.5", "speech.char=0.01"},
		{"prices", "set", "video.2K.second=2"},
	} {
		if code, _, stderr := enqueueOn(ctx, n.URL, args...); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
	}
	code, out, stderr := enqueueOn(ctx, n.URL, "tenants", "show", "acme", "--json")
	if code != ExitOK {
		t.Fatalf("tenants show: exit %d: %s", code, stderr)
	}
	var shown struct{ Tenants []tenantReport }
	if err := json.Unmarshal([]byte(out), &shown); err != nil || len(shown.Tenants) != 1 {
		t.Fatalf("tenants show --json = %s (%v)", out, err)
	}
	s := shown.Tenants[0].Settings
	if s.Weight != 3 || s.MaxTasks["video"] != 4 || s.Budget == nil || s.Budget.Credits != 100 ||
		s.Budget.Per != tenants.PerWeek || s.OnBudget != tenants.OnBudgetFail || shown.Tenants[0].Period != tenants.PerWeek {
		t.Errorf("settings = %+v", shown.Tenants[0])
	}
	code, out, _ = enqueueOn(ctx, n.URL, "prices", "show", "--json")
	var prices struct{ Rules map[string]float64 }
	if code != ExitOK || json.Unmarshal([]byte(out), &prices) != nil || len(prices.Rules) != 3 || prices.Rules["video.2K.second"] != 2 {
		t.Errorf("prices show = %d %s", code, out)
	}
	if code, out, _ := enqueueOn(ctx, n.URL, "tenants", "list"); code != ExitOK || !strings.Contains(out, "acme") {
		t.Errorf("tenants list = %d %s", code, out)
	}
}

// TestPublishMarksScheduler: publishing a job of another tenant or
// priority than the defaults writes the scheduler marker; default jobs
// write nothing.
func TestPublishMarksScheduler(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, spec string
		marked     bool
	}{
		{"default job", `{"kind":"speech","id":"s-1","speech":{"model":"m","input":{"text":"hi","voice":"v"}}}`, false},
		{"other tenant", `{"kind":"speech","id":"s-2","tenant":"acme","speech":{"model":"m","input":{"text":"hi","voice":"v"}}}`, true},
		{"other priority", `{"kind":"speech","id":"s-3","priority":1,"speech":{"model":"m","input":{"text":"hi","voice":"v"}}}`, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := testenv.StartNATS(t)
			ctx := testenv.Context(t, 60*time.Second)
			if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
				t.Fatal(err)
			}
			var out, errs bytes.Buffer
			env := Env{
				Stdin: strings.NewReader(tt.spec), Stdout: &out, Stderr: &errs,
				Getenv:     func(k string) string { return map[string]string{"SLUICE_NATS_URL": n.URL}[k] },
				IsTerminal: func(io.Writer) bool { return false },
				Now:        time.Now,
				Rand:       strings.NewReader(strings.Repeat("x", 64)),
			}
			if code := Run(ctx, []string{"submit", "-f", "-"}, env); code != ExitOK {
				t.Fatalf("submit: exit %d: %s", code, errs.String())
			}
			kv, err := n.JS.KeyValue(ctx, contract.TenantsBucket)
			if err != nil {
				t.Fatal(err)
			}
			_, err = kv.Get(ctx, tenants.SchedulerKey)
			if marked := err == nil; marked != tt.marked {
				t.Errorf("marker written = %v (%v), want %v", marked, err, tt.marked)
			}
		})
	}
}

// TestTenantsSetAndShowMistakes: --budget NaN or Inf is refused on
// --budget; every bad flag of one tenants set is reported at once; and
// tenants show of a tenant with no settings and no spend says so and
// exits as for an unknown job.
func TestTenantsSetAndShowMistakes(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"NaN", "Inf", "-Inf", "+Inf"} {
		code, _, stderr := enqueueOn(ctx, n.URL, "tenants", "set", "acme", "--budget", v)
		if code != ExitUsage || !strings.Contains(stderr, "--budget") {
			t.Errorf("--budget %s: exit %d, stderr %q; want exit 2 naming --budget", v, code, stderr)
		}
	}
	code, _, stderr := enqueueOn(ctx, n.URL, "tenants", "set", "acme", "--weight", "0", "--budget", "-1", "--on-budget", "drop")
	for _, want := range []string{"--weight", "--budget", "--on-budget"} {
		if code != ExitUsage || !strings.Contains(stderr, want) {
			t.Errorf("three bad flags: exit %d, stderr %q lacks %s", code, stderr, want)
		}
	}
	code, out, stderr := enqueueOn(ctx, n.URL, "tenants", "show", "nosuch")
	if code != ExitNoSuchJob || !strings.Contains(out+stderr, "nosuch has no settings and no spend") {
		t.Errorf("tenants show nosuch: exit %d, out %q, stderr %q; want exit %d saying it has no settings and no spend", code, out, stderr, ExitNoSuchJob)
	}
}

// TestSpendByKindCountsJobs: spend --by kind fills its JOBS column from the
// ledger's day keys, as --by tenant does.
func TestSpendByKindCountsJobs(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.TenantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	day := tenants.Day{Spent: 7, ByKind: map[string]float64{"video": 5, "speech": 2},
		Jobs: 3, JobsByKind: map[string]int{"video": 2, "speech": 1}}
	data, _ := json.Marshal(day)
	if _, err := kv.Put(ctx, tenants.SpendKey("acme", time.Now()), data); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := enqueueOn(ctx, n.URL, "spend", "--by", "kind", "--json")
	if code != ExitOK {
		t.Fatalf("spend --by kind: exit %d: %s", code, stderr)
	}
	var got struct {
		Spend []struct {
			Key  string `json:"key"`
			Jobs int    `json:"jobs"`
		} `json:"spend"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]int{}
	for _, r := range got.Spend {
		jobs[r.Key] = r.Jobs
	}
	if jobs["video"] != 2 || jobs["speech"] != 1 {
		t.Errorf("jobs by kind = %v, want video 2, speech 1", jobs)
	}
	if code, out, _ := enqueueOn(ctx, n.URL, "spend", "--by", "kind"); code != ExitOK || strings.Contains(out, " -\n") {
		t.Errorf("spend --by kind table leaves JOBS empty:\n%s", out)
	}
}

// TestTenantsWaitingIsNotStarted: WAITING counts a tenant's jobs no worker
// has taken; one a worker holds (running) is in flight, not waiting.
func TestTenantsWaitingIsNotStarted(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	subject := contract.ClassSubject("speech", 3, "acme")
	for i := range 2 {
		spec := fmt.Sprintf(`{"kind":"speech","id":"s-%d","tenant":"acme","speech":{"model":"m","input":{"text":"hi","voice":"v"}}}`, i)
		if _, err := n.JS.Publish(ctx, subject, []byte(spec)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := n.JS.CreateOrUpdateConsumer(ctx, contract.JobsStream, jetstream.ConsumerConfig{
		Durable: contract.ClassConsumerName("speech", 3, "acme"), FilterSubject: subject,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
	}
	code, out, stderr := enqueueOn(ctx, n.URL, "tenants", "show", "acme", "--json")
	if code != ExitOK {
		t.Fatalf("tenants show acme: exit %d: %s", code, stderr)
	}
	var got struct {
		Tenants []struct {
			Waiting uint64 `json:"waiting"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Tenants) != 1 {
		t.Fatalf("tenants show acme --json = %s (%v)", out, err)
	}
	if got.Tenants[0].Waiting != 1 {
		t.Errorf("waiting = %d, want 1 (two jobs, one held by a worker)", got.Tenants[0].Waiting)
	}
}

// TestTenantsSetBound: --bound and --max-priority are stored, shown by
// show --json and list, and --bound=false / --max-priority 0 undo them;
// a priority outside 0 to 5 is refused with nothing written.
func TestTenantsSetBound(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"6", "-1"} {
		if code, _, stderr := enqueueOn(ctx, n.URL, "tenants", "set", "acme", "--max-priority", p); code != ExitUsage || !strings.Contains(stderr, "--max-priority") {
			t.Errorf("--max-priority %s: exit %d, stderr %q; want exit 2 naming --max-priority", p, code, stderr)
		}
	}
	show := func() tenants.Settings {
		t.Helper()
		code, out, stderr := enqueueOn(ctx, n.URL, "tenants", "show", "acme", "--json")
		var shown struct{ Tenants []tenantReport }
		if code != ExitOK || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Tenants) != 1 {
			t.Fatalf("tenants show: exit %d, %s %s", code, out, stderr)
		}
		return shown.Tenants[0].Settings
	}
	if code, _, stderr := enqueueOn(ctx, n.URL, "tenants", "set", "acme", "--bound", "--max-priority", "2"); code != ExitOK {
		t.Fatalf("tenants set --bound: exit %d: %s", code, stderr)
	}
	if s := show(); !s.Bound || s.MaxPriority != 2 {
		t.Errorf("settings after --bound --max-priority 2 = %+v", s)
	}
	if code, out, _ := enqueueOn(ctx, n.URL, "tenants", "list"); code != ExitOK || !strings.Contains(out, "bound, max-priority 2") {
		t.Errorf("tenants list = %d %s; want it to show bound and max-priority 2", code, out)
	}
	if code, _, stderr := enqueueOn(ctx, n.URL, "tenants", "set", "acme", "--bound=false", "--max-priority", "0"); code != ExitOK {
		t.Fatalf("tenants set --bound=false: exit %d: %s", code, stderr)
	}
	if s := show(); s.Bound || s.MaxPriority != 0 {
		t.Errorf("settings after --bound=false --max-priority 0 = %+v", s)
	}
}
