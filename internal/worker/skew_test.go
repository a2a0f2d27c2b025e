package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestSkewedWorkersPayOnce runs two workers whose clocks are 90s behind
// and 90s ahead: the job's second delivery reaches the worker ahead while
// the worker behind is inside the paid submit of its first. By their
// clocks the "submitting" record, just written, is three minutes old,
// more than the two AckWaits a delivery gives a submit; measured on the
// second worker's own clock it is new, and the job is left to the first
// delivery: one paid submit.
func TestSkewedWorkersPayOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// The first submit's answer takes long enough for the second worker
	// to start and get the job's second delivery (a race build starts
	// slowly), and less than the two AckWaits a delivery gives a submit;
	// the three minutes between the clocks are more.
	b.cfg.AckWait = 20 * time.Second
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Latency: 12 * time.Second})
	// The worker behind holds one video job at most, so the second
	// delivery goes to the worker ahead.
	b.start(t, func(c *config.Config) {
		c.WorkerName, c.FaultClockOffset, c.MaxInflight = "behind", -90*time.Second, 1
	})
	const id = "skewed-submit"
	spec := videoSpec(id, "skewed submit")
	b.publish(t, "video", "", spec)
	b.awaitRecord(t, id, 30*time.Second, func(r *state.Record) bool { return r.Status == state.StatusSubmitting })
	b.start(t, func(c *config.Config) {
		c.WorkerName, c.FaultClockOffset, c.DataDir = "ahead", 90*time.Second, t.TempDir()
	})
	b.publish(t, "video", "", spec)

	ev := b.await(t, id, 90*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("event %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	b.awaitSettled(t)
	if n := b.media.SubmitCount("skewed submit"); n != 1 {
		t.Errorf("paid submits = %d, want 1", n)
	}
	if rec := b.record(t, id); rec.Submits != 1 || !strings.Contains(b.logs.String(), runner.LogLeftInSubmit) {
		t.Errorf("record's submits %d, want 1; left in submit logged %v", rec.Submits, strings.Contains(b.logs.String(), runner.LogLeftInSubmit))
	}
}
