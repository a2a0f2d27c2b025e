package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-dev/sluice/internal/state"
)

// TestTenantsPageInBrowser: a tenant with a budget runs a priced job on a
// real worker, and the console's Tenants page, in headless Chromium,
// shows its settings, its spend against the budget and today's bar in
// its spend chart, drawn as inline SVG under the console's
// Content-Security-Policy.
func TestTenantsPageInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	b := setup(t, setupOpts{})
	for _, args := range [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "acme", "--weight", "3", "--max-tasks", "video=4", "--budget", "100", "--per", "month"},
	} {
		if out, code := b.enqueue(t, "", args...); code != 0 {
			t.Fatalf("enqueue %v: exit %d: %s", args, code, out)
		}
	}
	b.start(t)
	spec := videoSpec("acme-1", "a harbour paid for by acme")
	spec["tenant"], spec["priority"] = "acme", 2
	b.publish(t, "video", "acme-1", spec)
	if ev := b.await(t, "acme-1", 3*time.Minute); ev.Data.Status != string(state.StatusSucceeded) || ev.Data.Cost == nil || *ev.Data.Cost != 5 {
		t.Fatalf("acme-1 = %s, cost %v; want succeeded at 5 credits", ev.Data.Status, ev.Data.Cost)
	}

	var row, title string
	var bars int
	var drawn, fills bool
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+b.ep.HTTPAddr+"/console/"),
		chromedp.Click(chromedp.CSS(`nav a[href="/console/tenants"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tenant-acme svg.spend rect.bar`)),
		into(chromedp.Text(chromedp.CSS(`tr[data-tenant="acme"]`)), &row),
		into(chromedp.Evaluate[int](`document.querySelectorAll("#tenant-acme svg.spend rect.bar").length`), &bars),
		// The bar is laid out with a height: the SVG was rendered, not
		// only parsed.
		into(chromedp.Evaluate[bool](`document.querySelector("#tenant-acme svg.spend rect.bar").getBBox().height > 0`), &drawn),
		into(chromedp.Evaluate[string](`document.querySelector("#tenant-acme svg.spend .day title").textContent`), &title),
		// The chart takes its card's width, not a fixed 640 pixels.
		into(chromedp.Evaluate[bool](`(() => { const s = document.querySelector("#tenant-acme svg.spend"), p = s.parentElement, cs = getComputedStyle(p);
			return s.getBoundingClientRect().width >= p.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 1 })()`), &fills),
	)
	if err != nil {
		t.Fatal(err)
	}
	row = strings.Join(strings.Fields(row), " ")
	for _, want := range []string{"acme", "video 4", "100 per month", "5 of 100 credits this month"} {
		if !strings.Contains(row, want) {
			t.Errorf("acme's row lacks %q: %q", want, row)
		}
	}
	if bars != 1 || !drawn {
		t.Errorf("acme's chart: %d bars, drawn %v; want today's bar, drawn", bars, drawn)
	}
	if !fills {
		t.Error("acme's chart is narrower than its card")
	}
	if today := time.Now().UTC().Format("2006-01-02"); !strings.HasPrefix(title, today+": 5 credits spent by 1 jobs") {
		t.Errorf("the bar's title %q, want today's spend", title)
	}
	screenshot(t, ctx, t.TempDir(), "tenants")
}

// TestBudgetWaitInBrowser: a tenant whose budget is spent has a job
// waiting before any worker takes it. From the Tenants page, the tenant's
// name leads to its jobs, where the job is listed marked waiting for
// budget, and its page says so with its tenant and spec.
func TestBudgetWaitInBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	b := setup(t, setupOpts{})
	b.enqueueOut(t, "prices", "set", "video.768P.second=1")
	b.enqueueOut(t, "tenants", "set", "spent", "--budget", "5")
	b.start(t)
	b.publish(t, "video", "spent-1", tenantVideo("spent-1", "spent"))
	if ev := b.await(t, "spent-1", time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("spent-1 = %s", ev.Data.Status)
	}
	b.publish(t, "video", "spent-w", tenantVideo("spent-w", "spent"))
	awaitBudgetWait(t, b, "spent-w")

	var row, badge, tenant string
	var full bool
	err := chromedp.Do(ctx,
		chromedp.Navigate("http://"+b.ep.HTTPAddr+"/console/tenants"),
		// A budget spent to the last credit is not shown as fine: the
		// meter's value is in its high region and its optimum low.
		into(chromedp.Evaluate[bool](`(function(m){return m.value >= m.high && m.optimum < m.low})(document.querySelector('tr[data-tenant="spent"] meter'))`), &full),
		chromedp.Click(chromedp.CSS(`tr[data-tenant="spent"] td.id a`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="spent-w"]`)),
		into(chromedp.Text(chromedp.CSS(`tr[data-id="spent-w"]`)), &row),
		chromedp.Click(chromedp.CSS(`tr[data-id="spent-w"] td.id a`)),
		chromedp.WaitVisible(chromedp.CSS(`#waitingfor`)),
		into(chromedp.Text(chromedp.CSS(`#waitingfor`)), &badge),
		into(chromedp.Text(chromedp.CSS(`dl.facts`)), &tenant),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(row, "waiting for budget") || badge != "waiting for budget" || !strings.Contains(tenant, "spent") {
		t.Errorf("row %q, badge %q, facts %q; want the job marked waiting for budget, of tenant spent", row, badge, tenant)
	}
	if !full {
		t.Error("the budget meter of a spent budget is in its optimum (green) region")
	}
	screenshot(t, ctx, t.TempDir(), "budget-wait")
}
