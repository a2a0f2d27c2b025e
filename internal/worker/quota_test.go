package worker_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/state"
)

// fleetWorker names a worker of a fleet with a media task quota of n.
func fleetWorker(name string, n int) func(*config.Config) {
	return func(c *config.Config) {
		c.WorkerName, c.FleetMediaTasks, c.FleetMediaRate = name, n, 200
		c.Kinds, c.Console = []string{"video", "speech"}, false
	}
}

// TestFleetQuotaHoldsAcrossWorkers runs many jobs through three workers
// sharing a quota of 3 media tasks: upstream never runs more than 3 at
// once, and every job waits for its turn without failing or being
// delivered again.
func TestFleetQuotaHoldsAcrossWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 400 * time.Millisecond})
	for i := range 3 {
		b.start(t, fleetWorker(fmt.Sprintf("fleet-%d", i), 3))
	}
	const jobs = 24
	for i := range jobs {
		id := fmt.Sprintf("q-%02d", i)
		if i%4 == 3 {
			b.publish(t, "speech", id, speechSpec(id, "quota "+id, "async"))
		} else {
			b.publish(t, "video", id, videoSpec(id, "quota "+id))
		}
	}
	var wg sync.WaitGroup
	for i := range jobs {
		id := fmt.Sprintf("q-%02d", i)
		wg.Go(func() {
			if ev := b.await(t, id, 2*time.Minute); ev.Data.Status != "succeeded" {
				t.Errorf("%s ended %s: %+v", id, ev.Data.Status, ev.Data.Error)
			}
		})
	}
	wg.Wait()
	peak := b.media.Counters().PeakRunning()
	if peak > 3 || peak == 0 {
		t.Fatalf("the simulator ran %d tasks at once; the fleet's quota is 3", peak)
	}
	for i := range jobs {
		id := fmt.Sprintf("q-%02d", i)
		if rec := b.record(t, id); rec.Attempts != 1 || rec.Submits != 1 {
			t.Errorf("%s: %d deliveries and %d submits, want 1 and 1 (waiting for the quota must not redeliver)", id, rec.Attempts, rec.Submits)
		}
	}
	t.Logf("peak %d tasks at once over %d jobs", peak, jobs)
}

// TestFleetQuotaFollowsHandedBackTasks stops a worker while its tasks run
// upstream: their leases still count, and the worker that resumes them
// takes them over (no second submit) while new jobs wait for their turn.
func TestFleetQuotaFollowsHandedBackTasks(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 300 * time.Millisecond})
	stopA := b.start(t, fleetWorker("fleet-a", 2))
	for _, id := range []string{"long-1", "long-2"} {
		b.publish(t, "video", id, videoSpec(id, id+" [sim:duration=4s]"))
	}
	for _, id := range []string{"long-1", "long-2"} {
		b.awaitStatus(t, id, state.StatusSubmitted, 30*time.Second)
	}
	for i := range 4 {
		id := fmt.Sprintf("short-%d", i)
		b.publish(t, "video", id, videoSpec(id, id))
	}
	stopA()
	b.start(t, fleetWorker("fleet-b", 2))
	for _, id := range []string{"long-1", "long-2", "short-0", "short-1", "short-2", "short-3"} {
		if ev := b.await(t, id, time.Minute); ev.Data.Status != "succeeded" {
			t.Errorf("%s ended %s: %+v", id, ev.Data.Status, ev.Data.Error)
		}
	}
	if peak := b.media.Counters().PeakRunning(); peak > 2 {
		t.Fatalf("the simulator ran %d tasks at once; the fleet's quota is 2", peak)
	}
	for _, id := range []string{"long-1", "long-2"} {
		if n := b.media.SubmitCount(id + " [sim:duration=4s]"); n != 1 {
			t.Errorf("%s submitted %d times", id, n)
		}
	}
}
