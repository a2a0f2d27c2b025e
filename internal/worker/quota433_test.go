package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestQuotaExhaustedSubmit: a media submit answered 433 (the account's
// quota exhausted) created nothing and is sent again later: after two 433s
// the job succeeds with one task, its waits recorded and its last error
// gone.
func TestQuotaExhaustedSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.MediaQuotaRetry, c.MediaQuotaWait = 50*time.Millisecond, time.Minute })
	const prompt = "a harbour after the quota resets"
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error433Rate: 1, Times: 2})
	b.publish(t, "video", "quota-then-ok", videoSpec("quota-then-ok", prompt))
	if ev := b.await(t, "quota-then-ok", time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("job = %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("tasks created = %d, want 1", n)
	}
	if rec := b.record(t, "quota-then-ok"); rec.QuotaWaits != 2 || rec.ConflictWaits != 0 || rec.LastError != nil || rec.Submits != 1 {
		t.Errorf("record: quota_waits %d (want 2), conflict_waits %d (want 0), submits %d (want 1), last error %+v (want none)",
			rec.QuotaWaits, rec.ConflictWaits, rec.Submits, rec.LastError)
	}
}

// TestQuotaExhaustedForGood: past SLUICE_MEDIA_QUOTA_WAIT the job fails
// upstream_quota_exhausted with upstream's message, nothing submitted.
func TestQuotaExhaustedForGood(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.MediaQuotaRetry, c.MediaQuotaWait = 50*time.Millisecond, time.Second })
	const prompt = "a harbour over quota all day"
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error433Rate: 1})
	b.publish(t, "video", "quota-for-good", videoSpec("quota-for-good", prompt))
	ev := b.await(t, "quota-for-good", time.Minute)
	if e := ev.Data.Error; ev.Data.Status != string(state.StatusFailed) || e == nil || e.Code != "upstream_quota_exhausted" ||
		e.Stage != state.StageSubmit || !strings.Contains(e.Message, apisim.QuotaExhaustedMessage) {
		t.Fatalf("job = %s %+v, want failed upstream_quota_exhausted at submit with upstream's message", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(prompt); n != 0 {
		t.Errorf("tasks created = %d, want 0", n)
	}
}
