package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
)

// The bound on waiting out an exhausted quota (SLUICE_MEDIA_QUOTA_WAIT)
// counts from the job's first 433, whatever came between: a submit
// answered 429 after a 433 does not start the bound again, so the next
// 433 past the bound fails the job at once.
func TestQuotaWaitBoundSurvivesOtherErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const wait = 2 * time.Second
	b.start(t, func(c *config.Config) { c.MediaQuotaRetry, c.MediaQuotaWait = 50*time.Millisecond, wait })
	const prompt = "a harbour over quota, then busy"
	faults := b.media.Faults()
	faults.Set(apisim.EndpointVideoSubmit, apisim.Fault{Error433Rate: 1, Times: 1})
	b.publish(t, "video", "quota-busy", videoSpec("quota-busy", prompt))
	first := time.Now()
	b.awaitRecord(t, "quota-busy", 30*time.Second, func(r *state.Record) bool { return r.QuotaWaits == 1 })
	faults.Set(apisim.EndpointVideoSubmit, apisim.Fault{Error429Rate: 1, RetryAfter: 10 * time.Millisecond})
	b.awaitRecord(t, "quota-busy", 30*time.Second, func(r *state.Record) bool {
		return r.LastError != nil && r.LastError.Code != runner.CodeQuotaExhausted
	})
	for time.Since(first) <= wait+time.Second {
		time.Sleep(50 * time.Millisecond)
	}
	faults.Set(apisim.EndpointVideoSubmit, apisim.Fault{Error433Rate: 1})
	ev := b.await(t, "quota-busy", time.Minute)
	if e := ev.Data.Error; ev.Data.Status != string(state.StatusFailed) || e == nil || e.Code != runner.CodeQuotaExhausted {
		t.Fatalf("job = %s %+v, want failed %s", ev.Data.Status, ev.Data.Error, runner.CodeQuotaExhausted)
	}
	if rec := b.record(t, "quota-busy"); rec.QuotaWaits != 1 {
		t.Errorf("quota waits %d, want 1: the 433 past the bound waited again", rec.QuotaWaits)
	}
	if n := b.media.SubmitCount(prompt); n != 0 {
		t.Errorf("tasks created = %d, want 0", n)
	}
}
