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
	stopA := b.start(t, fleetWorker("fleet-a", 2), func(c *config.Config) { c.Console = true })
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

	// What an operator sees while the quota is full: the CLI, the
	// console's overview and the worker's metrics.
	out, code := b.enqueue(t, "", "quota", "--json")
	var rep struct {
		Quotas []quota.Status `json:"quotas"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("enqueue quota --json: exit %d, %v: %s", code, err, out)
	}
	if len(rep.Quotas) != 1 || rep.Quotas[0].Resource != "media" || rep.Quotas[0].InUse != 2 || rep.Quotas[0].Limit != 2 || rep.Quotas[0].Rate != 200 {
		t.Errorf("enqueue quota: %+v, want media 2 in use of 2 at 200 req/s", rep.Quotas)
	}
	if out, code := b.enqueue(t, "", "quota"); code != 0 || !regexp.MustCompile(`(?m)^media\s+2\s+2\s`).MatchString(out) {
		t.Errorf("enqueue quota: exit %d:\n%s", code, out)
	}
	resp, err := http.Get("http://" + b.ep.HTTPAddr + "/console/overview")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "media quota: tasks upstream / fleet limit") {
		t.Errorf("the console's overview shows no media quota:\n%s", page)
	}
	metrics := b.scrape(t)
	for _, want := range []string{`sluice_quota_limit{resource="media"} 2`, `sluice_quota_held{resource="media"} 2`, `sluice_quota_rate_limit{resource="media"} 200`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s:\n%s", want, grepLines(metrics, "sluice_quota"))
		}
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

// TestFleetQuotaSurvivesAKilledWorker kills a worker (SIGKILL) while its
// tasks run upstream: the worker that resumes them takes their leases over
// without a second submit, no new task starts in their place while they
// run, and the jobs queued behind them all end.
func TestFleetQuotaSurvivesAKilledWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 300 * time.Millisecond})
	b.spawnEnv = []string{"SLUICE_FLEET_MEDIA_TASKS=2", "SLUICE_KINDS=video,speech"}
	doomed := b.spawn(t, "doomed")
	long := []string{"killed-1", "killed-2"}
	for _, id := range long {
		b.publish(t, "video", id, videoSpec(id, id+" [sim:duration=6s]"))
	}
	for _, id := range long {
		b.awaitRecord(t, id, 30*time.Second, func(r *state.Record) bool { return r.Upstream.TaskID != "" })
	}
	var short []string
	for i := range 4 {
		id := fmt.Sprintf("after-kill-%d", i)
		short = append(short, id)
		b.publish(t, "video", id, videoSpec(id, id))
	}
	doomed.kill(t)
	b.start(t, fleetWorker("heir", 2), func(c *config.Config) { c.AckWait = 2 * time.Second })
	for _, id := range append(long, short...) {
		if ev := b.await(t, id, time.Minute); ev.Data.Status != "succeeded" {
			t.Errorf("%s ended %s: %+v", id, ev.Data.Status, ev.Data.Error)
		}
	}
	if peak := b.media.Counters().PeakRunning(); peak > 2 {
		t.Fatalf("the simulator ran %d tasks at once; the fleet's quota is 2", peak)
	}
	for _, id := range long {
		if n := b.media.SubmitCount(id + " [sim:duration=6s]"); n != 1 {
			t.Errorf("%s submitted %d times", id, n)
		}
	}
}

// TestFleetQuotaHandsOverADeadWorkersJobs kills a worker (SIGKILL) while
// its tasks run upstream, with an AckWait of ten minutes, and starts it
// again under the same name, as a restart policy would: the other worker
// learns of the death (the NATS server's "no responders", or a new life
// answering for the name), hands its leases back and Naks its deliveries,
// so the jobs resume at once (not ten minutes later), without a second
// submit, and the jobs queued behind them run in the places they free.
func TestFleetQuotaHandsOverADeadWorkersJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 300 * time.Millisecond})
	b.spawnEnv = []string{"SLUICE_FLEET_MEDIA_TASKS=2", "SLUICE_KINDS=video,speech", "SLUICE_ACK_WAIT=10m"}
	doomed := b.spawn(t, "doomed")
	const prompt = " [sim:duration=8s]"
	long := []string{"dead-1", "dead-2"}
	for _, id := range long {
		b.publish(t, "video", id, videoSpec(id, id+prompt))
	}
	for _, id := range long {
		b.awaitRecord(t, id, 30*time.Second, func(r *state.Record) bool { return r.Upstream.TaskID != "" })
	}
	b.start(t, fleetWorker("heir", 2), func(c *config.Config) { c.AckWait = 10 * time.Minute })
	// The heir judges a worker by its silence only once it has heard it.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.logs.String(), quota.LogHeard) {
		if time.Now().After(deadline) {
			t.Fatal("the heir never heard the doomed worker on its alive subject")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var short []string
	for i := range 3 {
		id := fmt.Sprintf("behind-%d", i)
		short = append(short, id)
		b.publish(t, "video", id, videoSpec(id, id))
	}
	doomed.kill(t)
	b.spawn(t, "doomed")
	for _, id := range append(long, short...) {
		if ev := b.await(t, id, 2*time.Minute); ev.Data.Status != "succeeded" {
			t.Errorf("%s ended %s: %+v", id, ev.Data.Status, ev.Data.Error)
		}
	}
	if !strings.Contains(b.logs.String(), quota.LogHandedOver) {
		t.Error("the heir did not log the hand-over")
	}
	if peak := b.media.Counters().PeakRunning(); peak > 2 {
		t.Fatalf("the simulator ran %d tasks at once; the fleet's quota is 2", peak)
	}
	for _, id := range long {
		if n := b.media.SubmitCount(id + prompt); n != 1 {
			t.Errorf("%s submitted %d times", id, n)
		}
		if rec := b.record(t, id); rec.Attempts != 2 {
			t.Errorf("%s: %d deliveries, want 2", id, rec.Attempts)
		}
	}
}

// TestFleetComputeQuota runs compute jobs through two workers sharing a
// quota of one compute job at a time and a fleet rate: the platform never
// runs two at once, and every job ends.
func TestFleetComputeQuota(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{computeTime: 300 * time.Millisecond})
	for _, name := range []string{"hpc-a", "hpc-b"} {
		b.start(t, func(c *config.Config) {
			c.WorkerName, c.Kinds, c.Console = name, []string{"compute"}, false
			c.FleetComputeJobs, c.FleetComputeRate = 1, 100
		})
	}
	script := "#!/bin/sh\necho simulating\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n"
	var ids []string
	for i := range 4 {
		id := fmt.Sprintf("hpc-q-%d", i)
		ids = append(ids, id)
		b.publish(t, "compute", id, computeSpec(t, b, id, script))
	}
	for _, id := range ids {
		if ev := b.await(t, id, time.Minute); ev.Data.Status != "succeeded" {
			t.Errorf("%s ended %s: %+v", id, ev.Data.Status, ev.Data.Error)
		}
	}
	if peak := b.compute.Counters().PeakRunning(); peak != 1 {
		t.Fatalf("the platform ran %d jobs at once; the fleet's quota is 1", peak)
	}
}

// TestFleetQuotaCountsAnAmbiguousSubmit: a submit answered 500 after the
// task was made fails its job (submit_ambiguous), but the task it may have
// made runs upstream unseen, so its lease keeps counting as handed back
// until it lapses: the next job waits instead of running beside it.
func TestFleetQuotaCountsAnAmbiguousSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 3 * time.Second})
	b.start(t, fleetWorker("ambiguous", 1))
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error500AfterRate: 1})
	b.publish(t, "video", "amb-1", videoSpec("amb-1", "ambiguous one"))
	if ev := b.await(t, "amb-1", time.Minute); ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "submit_ambiguous" {
		t.Fatalf("amb-1 ended %s: %+v, want failed with submit_ambiguous", ev.Data.Status, ev.Data.Error)
	}
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{})
	b.publish(t, "video", "amb-2", videoSpec("amb-2", "ambiguous two"))
	if ev := b.await(t, "amb-2", time.Minute); ev.Data.Status != "succeeded" {
		t.Fatalf("amb-2 ended %s: %+v", ev.Data.Status, ev.Data.Error)
	}
	if peak := b.media.Counters().PeakRunning(); peak != 1 {
		t.Fatalf("the simulator ran %d tasks at once; the fleet's quota is 1 (the ambiguous submit's task counts)", peak)
	}
}
