package worker_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// browser starts headless Chromium (Debian's chromium package) for the
// test, or skips the test when none is installed.
func browser(t *testing.T) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no chromium on PATH: the console's browser tests need Debian's chromium package (.ci/run installs it)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1366, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, cancel := chromedp.NewExecAllocator(testenv.Context(t, 15*time.Minute), opts...)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// into runs a, keeping its value in dst.
func into[T any](a chromedp.Action[T], dst *T) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		v, err := a(ctx, t)
		*dst = v
		return chromedp.Void{}, err
	}
}

// screenshot saves the page as dir/name.png; SLUICE_SCREENSHOT_DIR, when
// set, gets a copy (how docs/console.png is made).
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	for _, d := range []string{dir, os.Getenv("SLUICE_SCREENSHOT_DIR")} {
		if d == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s", filepath.Join(dir, name+".png"))
}

// TestConsoleInBrowser drives the web console in headless Chromium against
// a real worker: the jobs list, a filter, a job's page, a live update
// arriving without a reload, logging in and cancelling a running job, the
// dead letters; and the token checks of the actions.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// clip-long runs until the test cancels it, however long the steps
	// before take: its deadline must not be what ends it.
	b.start(t, func(c *config.Config) { c.TaskTimeout = time.Hour })
	base := "http://" + b.ep.HTTPAddr + "/console/"
	ctx := browser(t)
	shots := t.TempDir()

	b.publish(t, "video", "clip-ok", videoSpec("clip-ok", "a paper boat"))
	b.publish(t, "video", "clip-blocked", videoSpec("clip-blocked", "no [sim:fail=blocked]"))
	b.publish(t, "speech", "line-1", speechSpec("line-1", "hello there", "async"))
	b.publish(t, "video", "clip-bad", `{"id":"clip-bad","kind":"video","video":{"model":"m"}}`)
	for _, id := range []string{"clip-ok", "clip-blocked", "line-1", "clip-bad"} {
		b.await(t, id, 3*time.Minute)
	}
	b.publish(t, "video", "clip-long", videoSpec("clip-long", "a long one [sim:duration=1h]"))
	b.awaitStatus(t, "clip-long", state.StatusRunning, 3*time.Minute)
	c := &consoleTour{b: b, ctx: ctx, base: base, shots: shots}
	t.Run("actions need the token", c.actionsNeedTheToken)
	t.Run("jobs list and filter", c.jobsListAndFilter)
	t.Run("a job's page", c.jobPage)
	t.Run("a live update arrives without a reload", c.liveUpdate)
	t.Run("log in and cancel a running job", c.logInAndCancel)
	t.Run("dead letters", c.deadLetters)

	if strings.Contains(b.logs.String(), secretConsole) {
		t.Error("the console token was logged")
	}
}

// consoleTour is what TestConsoleInBrowser's subtests share.
type consoleTour struct {
	b     *bundle
	ctx   context.Context
	base  string
	shots string
}

// actionsNeedTheToken is the subtest "actions need the token".
func (c *consoleTour) actionsNeedTheToken(t *testing.T) {
	b, base := c.b, c.base
	for _, c := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer wrong", http.StatusForbidden}} {
		req, _ := http.NewRequest(http.MethodPost, base+"jobs/clip-long/cancel", nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("cancel with %q: %d, want %d", c.auth, resp.StatusCode, c.want)
		}
	}
	if b.record(t, "clip-long").Cancel != nil {
		t.Fatal("a refused action set the cancel flag")
	}
}

// jobsListAndFilter is the subtest "jobs list and filter".
func (c *consoleTour) jobsListAndFilter(t *testing.T) {
	ctx, base, shots := c.ctx, c.base, c.shots
	var text string
	err := chromedp.Do(ctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-id="clip-blocked"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#live.on`)),
		into(chromedp.Text(chromedp.CSS(`#jobs`)), &text),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"clip-ok", "clip-blocked", "line-1", "clip-long", "blocked", "invalid_spec"} {
		if !strings.Contains(text, want) {
			t.Errorf("jobs list lacks %q:\n%s", want, text)
		}
	}
	screenshot(t, ctx, shots, "jobs")
	err = chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS(`select[name=status]`), "failed"),
		chromedp.Submit(chromedp.CSS(`#filters`)),
		chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-id="clip-blocked"]`)),
		into(chromedp.Text(chromedp.CSS(`#jobs`)), &text),
	)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "clip-ok") || strings.Contains(text, "clip-long") || !strings.Contains(text, "clip-bad") {
		t.Errorf("status=failed shows:\n%s", text)
	}
}

// jobPage is the subtest "a job's page".
func (c *consoleTour) jobPage(t *testing.T) {
	b, ctx, base, shots := c.b, c.ctx, c.base, c.shots
	var text string
	err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#jobs tr[data-id="clip-blocked"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)),
		into(chromedp.Text(chromedp.CSS(`#main`)), &text),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"blocked", "simulated failure", "submitted", "failed", "attempt 1", "test-worker", "task id", "a paper boat"} {
		if want == "a paper boat" {
			want = "no [sim:fail=blocked]" // the spec as submitted
		}
		if !strings.Contains(text, want) {
			t.Errorf("job page lacks %q:\n%s", want, text)
		}
	}
	screenshot(t, ctx, shots, "job")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"jobs/clip-ok"), chromedp.WaitVisible(chromedp.CSS(`table.artifacts`)), into(chromedp.Text(chromedp.CSS(`table.artifacts`)), &text)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "result-0.mp4") || !strings.Contains(text, "download") {
		t.Errorf("artifacts of clip-ok:\n%s", text)
	}
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`table.artifacts a`), "href"))
	if err != nil {
		t.Fatal(err)
	}
	href := attr.Value
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get("http://" + b.ep.HTTPAddr + href)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.Contains(loc, "X-Amz-Signature") {
		t.Errorf("download: %d to %q, want a presigned URL", resp.StatusCode, loc)
	}
}

// liveUpdate is the subtest "a live update arrives without a reload".
func (c *consoleTour) liveUpdate(t *testing.T) {
	b, ctx, base, shots := c.b, c.ctx, c.base, c.shots
	err := chromedp.Do(ctx,
		chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`#live.on`)),
		into(chromedp.Evaluate[bool](`window.__sameDocument = true`), new(bool)),
	)
	if err != nil {
		t.Fatal(err)
	}
	b.publish(t, "video", "clip-live", videoSpec("clip-live", "arrives while you watch"))
	var same bool
	err = chromedp.Do(ctx,
		chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-id="clip-live"]`)),
		into(chromedp.Evaluate[bool](`window.__sameDocument === true`), &same),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Error("the page was reloaded")
	}
	b.await(t, "clip-live", 3*time.Minute)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-id="clip-live"] .st-succeeded`))); err != nil {
		t.Fatal(err)
	}
	screenshot(t, ctx, shots, "console")
}

// logInAndCancel is the subtest "log in and cancel a running job".
func (c *consoleTour) logInAndCancel(t *testing.T) {
	b, ctx, base, shots := c.b, c.ctx, c.base, c.shots
	var text string
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"jobs/clip-long"),
		chromedp.WaitVisible(chromedp.CSS(`form.login`)),
		chromedp.SendKeys(chromedp.CSS(`form.login input[name=token]`), secretConsole),
		chromedp.Submit(chromedp.CSS(`form.login`)),
		chromedp.WaitVisible(chromedp.CSS(`#cancel`)),
		// A click by script: the live updates may swap the page's
		// nodes under a click by node id.
		into(chromedp.Evaluate[bool](`document.getElementById("cancel").click(), true`), new(bool)),
		// The worker cancels upstream and publishes the event; the
		// page shows it by itself.
		chromedp.WaitVisible(chromedp.CSS(`#jobstatus.st-cancelled`)),
		into(chromedp.Text(chromedp.CSS(`.flash.ok`)), &text),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "cancel requested") {
		t.Errorf("after cancel: %q", text)
	}
	screenshot(t, ctx, shots, "cancelled")
	if ev := b.await(t, "clip-long", 3*time.Minute); ev.Data.Status != "cancelled" {
		t.Errorf("clip-long ended %s", ev.Data.Status)
	}
}

// deadLetters is the subtest "dead letters".
func (c *consoleTour) deadLetters(t *testing.T) {
	ctx, base, shots := c.ctx, c.base, c.shots
	var text string
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"dlq"),
		chromedp.WaitVisible(chromedp.CSS(`table.dlq`)),
		into(chromedp.Text(chromedp.CSS(`table.dlq`)), &text),
	)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "clip-bad") || !strings.Contains(text, "invalid_spec") {
		t.Errorf("dead letters:\n%s", text)
	}
	screenshot(t, ctx, shots, "dlq")
}
