package runner

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
)

// A step before the paid submit is never handed back inside the submit
// window: the claim and the submit share one SubmitTimeout and the write
// of its answer has another, so a hard bound shorter than both (a
// SLUICE_STUCK_HANDBACK_FACTOR of 1 is valid) would Nak a delivery whose
// submit is still in flight, and its redelivery, finding "submitting",
// would pay again.
func TestPreSubmitStepCoversSubmitWindow(t *testing.T) {
	r := &Runner{cfg: Config{SubmitTimeout: 2 * time.Minute, StepMinDeadline: time.Minute}}
	j := &job{kind: "video", d: &consumer.Delivery{}}
	for _, st := range []state.Status{state.StatusSubmitting} {
		if got, want := r.stepDeadline(j, st), 2*r.cfg.SubmitTimeout; got < want {
			t.Errorf("deadline of step %s = %s, shorter than the submit window %s", st, got, want)
		}
	}
}
