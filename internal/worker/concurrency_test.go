package worker_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
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
