package worker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestConcurrencyConflictSubmit: a media submit answered 433 with code
// 10007 (too many tasks at once) created nothing and is sent again within
// seconds, not on the daily quota's schedule (SLUICE_MEDIA_QUOTA_RETRY is
// five minutes here): after four conflicts the job succeeds with one
// task. The conflicts count against neither SLUICE_MAX_DELIVER (two
// here) nor SLUICE_MEDIA_QUOTA_WAIT (one second here, which the waits
// pass): a fleet above the account's limit never dead-letters a job nor
// fails it upstream_quota_exhausted.
func TestConcurrencyConflictSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) {
		c.MediaQuotaRetry, c.MediaQuotaWait, c.MaxDeliver = 5*time.Minute, time.Second, 2
	})
	const prompt = "a harbour with too many boats at once"
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{ConcurrencyRate: 1, Times: 4})
	b.publish(t, "video", "conflict-then-ok", videoSpec("conflict-then-ok", prompt))
	if ev := b.await(t, "conflict-then-ok", 2*time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("job = %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("tasks created = %d, want 1", n)
	}
	rec := b.record(t, "conflict-then-ok")
	if rec.ConflictWaits != 4 || rec.QuotaWaits != 0 || !rec.QuotaSince.IsZero() || rec.LastError != nil || rec.Submits != 1 {
		t.Errorf("record: conflict_waits %d (want 4), quota_waits %d and quota_since %v (want none), submits %d (want 1), last error %+v (want none)",
			rec.ConflictWaits, rec.QuotaWaits, rec.QuotaSince, rec.Submits, rec.LastError)
	}
}

// TestFleetSettlesUnderTheAccountsConcurrency: two workers on one NATS,
// configured for 20 media tasks at once against an account that allows 8
// and answers 433/10007 above it. The conflicts lower the fleet's
// effective limit, which enqueue quota and the metrics show, and every
// job still ends succeeded, submitted once.
func TestFleetSettlesUnderTheAccountsConcurrency(t *testing.T) {
	t.Parallel()
	const account, configured, jobs = 8, 20, 60
	b := setup(t, setupOpts{taskTime: 2 * time.Second, mediaConcurrency: account})
	for i := range 2 {
		b.start(t, fleetWorker(fmt.Sprintf("aimd-%d", i), configured), func(c *config.Config) { c.MaxDeliver, c.Console = 2, i == 1 })
	}
	for i := range jobs {
		id := fmt.Sprintf("c-%02d", i)
		b.publish(t, "video", id, videoSpec(id, "conflict "+id))
	}
	var wg sync.WaitGroup
	for i := range jobs {
		id := fmt.Sprintf("c-%02d", i)
		wg.Go(func() {
			if ev := b.await(t, id, 5*time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
				t.Errorf("%s ended %s: %+v", id, ev.Data.Status, ev.Data.Error)
			}
		})
	}
	wg.Wait()
	for i := range jobs {
		id := fmt.Sprintf("c-%02d", i)
		if n := b.media.SubmitCount("conflict " + id); n != 1 {
			t.Errorf("%s: %d tasks created, want 1", id, n)
		}
	}
	refused := b.media.Counters().Get("requests:video.submit:433")
	if refused == 0 {
		t.Fatalf("the account never refused a submit: the test did not go over its limit")
	}

	out, code := b.enqueue(t, "", "quota", "--json")
	var rep struct {
		Quotas []quota.Status `json:"quotas"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || len(rep.Quotas) != 1 {
		t.Fatalf("enqueue quota --json: exit %d, %v: %s", code, err, out)
	}
	eff := rep.Quotas[0].Effective
	// Under the configured limit, and near the account's: a cut is made
	// from the leases in use, and the limit grows back past the level a
	// conflict came at only after a long quiet.
	if eff < 1 || eff > account+2 || rep.Quotas[0].Limit != configured {
		t.Errorf("enqueue quota: %+v, want the effective limit between 1 and %d, the limit %d", rep.Quotas[0], account+2, configured)
	}
	if out, code := b.enqueue(t, "", "quota"); code != 0 || !regexp.MustCompile(fmt.Sprintf(`(?m)^media\s+\d+\s+%d\s+%d\s`, eff, configured)).MatchString(out) {
		t.Errorf("enqueue quota: exit %d, want media's effective limit %d and limit %d:\n%s", code, eff, configured, out)
	}
	resp, err := http.Get("http://" + b.ep.HTTPAddr + "/console/overview")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if eff < configured && !strings.Contains(string(page), fmt.Sprintf("lowered from %d", configured)) {
		t.Errorf("the console's overview does not show the limit lowered from %d:\n%s", configured, page)
	}
	if m := b.scrape(t); !regexp.MustCompile(`sluice_quota_effective_limit\{resource="media"\} \d+`).MatchString(m) {
		t.Errorf("/metrics has no sluice_quota_effective_limit:\n%s", grepLines(m, "sluice_quota"))
	}
	t.Logf("%d submits refused 433/10007; effective limit %d of %d configured, account %d", refused, eff, configured, account)
}
