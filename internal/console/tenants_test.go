package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/console"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/tenants"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestTenantsPage reads a real SLUICE_TENANTS and SLUICE_JOBS: settings
// written by the client, ledger days written by the ledger over three
// days, and job messages in class queues; the page shows each tenant's
// figures, its waiting jobs per priority and its spend chart as inline
// SVG under the console's Content-Security-Policy.
func TestTenantsPage(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 20, 15, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, time.Minute)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	jc, err := jobclient.New(n.Conn, clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jc.SetTenant(ctx, "acme", func(s *tenants.Settings) {
		s.Weight, s.MaxTasks = 3, map[string]int{"video": 4}
		s.Budget = &tenants.Budget{Credits: 100, Per: tenants.PerMonth}
		s.Bound, s.MaxPriority = true, 2
	}); err != nil {
		t.Fatal(err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.TenantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	for i, daysAgo := range []int{4, 0} {
		at := now.AddDate(0, 0, -daysAgo)
		view, err := tenants.Watch(ctx, kv, func() time.Time { return at }, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		l := tenants.NewLedger(kv, n.Conn, view, func() time.Time { return at })
		for _, job := range []string{"settled", "open"}[:i+1] {
			if _, err := l.Reserve(ctx, "acme", job+"-"+at.Format("02"), "video", 7); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Settle(ctx, "acme", "settled-"+at.Format("02"), "", 6.5); err != nil {
			t.Fatal(err)
		}
	}
	for _, subject := range []string{"sluice.jobs.video.q.1.acme", "sluice.jobs.video.q.1.acme", "sluice.jobs.speech.q.4.beta"} {
		if _, err := n.JS.Publish(ctx, subject, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := console.New(console.Config{Client: jc, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/console/tenants")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET /console/tenants: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	checkTenantsPage(t, string(body))
}

// checkTenantsPage checks the page of TestTenantsPage.
func checkTenantsPage(t *testing.T, page string) {
	t.Helper()
	row := func(tenant string) string {
		m := regexp.MustCompile(`(?s)<tr data-tenant="` + tenant + `">.*?</tr>`).FindString(page)
		if m == "" {
			t.Fatalf("no row for %s:\n%s", tenant, page)
		}
		return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m, " ")), " ")
	}
	// acme: spent 6.5 on the 16th and 6.5 today, 7 reserved by the job
	// still open today.
	if got, want := row("acme"), "acme 3 video 4 100 per month on budget: wait bound max priority 2 1 2 p1 video 2 no 13 of 100 credits this month + 7 reserved"; got != want {
		t.Errorf("acme's row:\n got %q\nwant %q", got, want)
	}
	if got, want := row("beta"), "beta 1 none none any producer 0 1 p4 speech 1 no 0 credits this month"; got != want {
		t.Errorf("beta's row:\n got %q\nwant %q", got, want)
	}
	for _, want := range []string{`<meter min="0" max="100" low="75" high="99.99999999999999" optimum="0" value="20"`, `<section class="panel tenant" id="tenant-acme">`,
		`<svg class="spend"`, "13 credits", "2026-11-16: 6.5 credits spent by 1 jobs, 0 reserved by 0 open",
		"2026-11-20: 6.5 credits spent by 1 jobs, 7 reserved by 1 open", `class="on">Tenants</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(page, `<rect class="bar"`); n != 2 {
		t.Errorf("%d bars, want 2 (two days with spend)", n)
	}
	// No inline script or style: the Content-Security-Policy would block it.
	if strings.Count(page, "<script") != 1 || strings.Contains(page, "style=") || strings.Contains(page, "<style") {
		t.Error("the page has inline script or style")
	}
}
