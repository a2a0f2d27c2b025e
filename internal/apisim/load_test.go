package apisim_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// TestPeakRunningCountsTasksNotYetTerminal submits tasks on a settable
// clock: the peak counts the tasks submitted and not terminal at each
// submit; a cancelled or ended task no longer counts.
func TestPeakRunningCountsTasksNotYetTerminal(t *testing.T) {
	t.Parallel()
	b := setupSim(t, apisim.MediaConfig{})
	submit := func(prompt string) string {
		t.Helper()
		a := b.call(t, http.MethodPost, "/api/llm/v1/videos/generations", videoBody(prompt), asyncHdr)
		var task taskJSON
		if a.status != http.StatusOK || json.Unmarshal(a.body, &task) != nil {
			t.Fatalf("submit: %d %s", a.status, a.body)
		}
		return task.Output.TaskID
	}
	c := b.sim.Counters()
	first := submit("one")
	submit("two")
	if p := c.PeakRunning(); p != 2 {
		t.Fatalf("peak %d after two submits, want 2", p)
	}
	if a := b.call(t, http.MethodPost, "/api/llm/v1/tasks/"+first+"/cancel", "", nil); a.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", a.status, a.body)
	}
	submit("three") // "one" was cancelled: two run
	if p := c.PeakRunning(); p != 2 {
		t.Fatalf("peak %d after a cancel and a submit, want 2", p)
	}
	b.clock.Advance(11 * time.Second) // every task has ended
	submit("four")
	submit("five")
	if p := c.PeakRunning(); p != 2 {
		t.Fatalf("peak %d after the tasks ended and two more were submitted, want 2", p)
	}
	submit("six")
	if p := c.PeakRunning(); p != 3 {
		t.Fatalf("peak %d, want 3", p)
	}
	if _, n := c.BusiestSecond(); n < 1 {
		t.Fatalf("busiest second counts %d requests", n)
	}
	all, _ := c.BusiestSecond()
	if _, none := c.BusiestSecond(apisim.EndpointVideoSubmit, apisim.EndpointCancel); none != 0 || all.IsZero() {
		t.Fatalf("busiest second without submits and cancels counts %d, want 0", none)
	}
}
