package worker_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// opsJobs is how many jobs of each kind TestNATSOperationsPerJob runs.
const opsJobs = 20

// TestNATSOperationsPerJob runs jobs of every kind through one worker and
// counts, at the server, the NATS operations each kind costs per job:
// key-value writes and reads, event publishes, acks, heartbeats, pull
// requests and other JetStream API requests (BENCHMARKS.md, "NATS
// operations per job"; run with -v to see the tables). The counts of
// background work (pulls, heartbeats) depend on timing and are only
// printed; what it asserts holds whatever the timing: one terminal event
// and one confirmed ack per job, and a fence ("submitting" written before the paid
// call) for every submit.
func TestNATSOperationsPerJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 300 * time.Millisecond})
	tap := testenv.StartOpTap(t, b.nats.URL)
	b.start(t, func(c *config.Config) {
		// Per-job work only: no sweep, no heartbeat while these jobs run.
		c.SweepInterval, c.AckWait = time.Hour, time.Minute
	})

	terminal := make(chan string, 4*opsJobs)
	sub, err := b.nats.Conn.Subscribe(contract.EventsSubjectPrefix+">", func(m *nats.Msg) {
		if st := state.Status(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]); st.Terminal() {
			terminal <- m.Subject
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	kinds := []struct {
		name, kind string
		spec       func(id string) any
	}{
		{"video, instant task", "video", func(id string) any { return videoSpec(id, "a paper boat [sim:duration=0s]") }},
		{"video, task seen running", "video", func(id string) any {
			return videoSpec(id, "a paper boat [sim:duration=300ms] [sim:pending=100ms] [sim:show-running]")
		}},
		{"speech sync", "speech", func(id string) any { return speechSpec(id, "hello", "sync") }},
		{"speech async", "speech", func(id string) any { return speechSpec(id, "hello [sim:duration=0s]", "async") }},
		{"speech stream", "speech", func(id string) any { return speechSpec(id, "hello", "stream") }},
		{"compute", "compute", func(id string) any {
			return computeSpec(t, b, id, "#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n")
		}},
	}
	for k, kind := range kinds {
		specs := make([]any, opsJobs)
		for i := range specs {
			specs[i] = kind.spec(fmt.Sprintf("ops-%d-%03d", k, i))
		}
		tap.Reset()
		for i, spec := range specs {
			data, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			m := nats.NewMsg(contract.JobSubject(kind.kind))
			m.Header.Set(contract.HeaderMsgID, fmt.Sprintf("ops-%d-%03d", k, i))
			m.Data = data
			if _, err := b.nats.JS.PublishMsg(testenv.Context(t, 10*time.Second), m); err != nil {
				t.Fatal(err)
			}
		}
		for range opsJobs {
			select {
			case subject := <-terminal:
				if !strings.HasSuffix(subject, ".succeeded") {
					t.Fatalf("%s: a job ended with %s", kind.name, subject)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("%s: not every job ended within 60s", kind.name)
			}
		}
		// A job is acked right after its terminal event, and the ack waits
		// for the server's confirmation (it replaces a record write).
		deadline := time.Now().Add(20 * time.Second)
		for tap.Counts()["ack, confirmed"] < opsJobs && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		counts := tap.Counts()
		t.Logf("NATS operations per job, %s (%d jobs):\n%s", kind.name, opsJobs, testenv.Table(counts, opsJobs))
		if counts["ack, confirmed"] != opsJobs || counts["ack"] != 0 {
			t.Errorf("%s: %d confirmed and %d other acks for %d jobs", kind.name, counts["ack, confirmed"], counts["ack"], opsJobs)
		}
		if n := counts["publish events.succeeded"]; n != opsJobs {
			t.Errorf("%s: %d terminal event publishes for %d jobs", kind.name, n, opsJobs)
		}
	}
}

// TestQueuedCopiesWriteNoCollecting: jobs whose quick copies wait for a copy
// slot cost no "collecting" write. 60 instant video jobs share 4 copy
// slots (SLUICE_COPY_CONCURRENCY=1) and each result download takes
// 300 ms, so the later jobs wait seconds for a slot, past the second after
// which a copying job's record shows "collecting", while a copy itself
// takes well under a second. That clock starts as the copy takes its
// slot: every job writes its state record as often as one that never
// waited (BENCHMARKS.md saw 0.19 writes per job more at 226 jobs/s, each
// with a conflict on the job's next write).
func TestQueuedCopiesWriteNoCollecting(t *testing.T) {
	t.Parallel()
	const jobs = 60
	b := setup(t, setupOpts{})
	b.media.Faults().Set(apisim.EndpointResult, apisim.Fault{Latency: 300 * time.Millisecond})
	tap := testenv.StartOpTap(t, b.nats.URL)
	b.start(t, func(c *config.Config) {
		c.SweepInterval, c.AckWait, c.CopyConcurrency = time.Hour, time.Minute, 1
	})
	tap.Reset()
	for i := range jobs {
		id := fmt.Sprintf("queued-%03d", i)
		b.publish(t, "video", id, videoSpec(id, "a paper boat [sim:duration=0s]"))
	}
	for i := range jobs {
		id := fmt.Sprintf("queued-%03d", i)
		if ev := b.await(t, id, 60*time.Second); ev.Data.Status != "succeeded" {
			t.Fatalf("%s: %+v", id, ev.Data)
		}
	}
	counts := tap.Counts()
	writes := counts["kv SLUICE_STATE create"] + counts["kv SLUICE_STATE update"] + counts["kv SLUICE_STATE put"]
	t.Logf("NATS operations per job, %d queued copies:\n%s", jobs, testenv.Table(counts, jobs))
	if writes > 4*jobs {
		t.Errorf("%d state writes for %d jobs (%.2f per job), want at most 4 per job: a job queued for a copy slot wrote \"collecting\"",
			writes, jobs, float64(writes)/jobs)
	}
}
