package worker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// computeModes are the two ways the compute simulator behaves: like the
// real platform (ended jobs move to the job history) and to
// compute-api.md's letter (they stay in the job detail; no history,
// cancel or job list).
var computeModes = []struct {
	name   string
	letter bool
}{{"platform", false}, {"letter", true}}

// A job that ends between two polls, with the poll interval longer than
// the time the platform keeps an ended job in the realtime detail,
// succeeds with its outputs; on the platform its event carries the
// history record's accounting as usage.
func TestComputeJobEndsBetweenPolls(t *testing.T) {
	t.Parallel()
	for _, m := range computeModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{computeTime: 300 * time.Millisecond, historyDelay: 50 * time.Millisecond, computeLetter: m.letter})
			b.start(t, func(c *config.Config) { c.ComputePoll = 1500 * time.Millisecond })
			id := "between-" + m.name
			b.publish(t, "compute", id, computeSpec(t, b, id, "#!/bin/sh\necho done\n#SIM output result.dat 2K\ncp params.nml params-copy.nml\n"))
			ev := b.await(t, id, 30*time.Second)
			if ev.Data.Status != "succeeded" {
				t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
			}
			if len(ev.Data.Artifacts) != 4 {
				t.Errorf("artifacts = %+v", ev.Data.Artifacts)
			}
			var usage map[string]any
			_ = json.Unmarshal(ev.Data.Usage, &usage)
			if m.letter {
				if usage != nil {
					t.Errorf("letter mode has no history, yet usage = %s", ev.Data.Usage)
				}
				return
			}
			for _, k := range []string{"cpuNuclearHour", "jobWalltimeUsed", "jobCpuTime", "jobMemUsed"} {
				if _, ok := usage[k]; !ok {
					t.Errorf("usage lacks %s: %s", k, ev.Data.Usage)
				}
			}
			if n := b.compute.Counters().Requests(apisim.EndpointComputeHistory); n < 1 {
				t.Errorf("history lookups = %d, want at least one", n)
			}
		})
	}
}

// A job that runs past its requested wall time fails, and says so.
func TestComputeJobTimesOut(t *testing.T) {
	t.Parallel()
	for _, m := range computeModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{historyDelay: 50 * time.Millisecond, computeLetter: m.letter})
			b.start(t)
			id := "walltime-" + m.name
			spec := computeSpec(t, b, id, "#!/bin/sh\n#SIM runfor 5s\necho slow\n")
			spec["compute"].(map[string]any)["job"].(map[string]any)["wall_time"] = "00:00:01"
			b.publish(t, "compute", id, spec)
			ev := b.await(t, id, 30*time.Second)
			if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeWallTimeExceeded {
				t.Fatalf("event %+v error %+v", ev.Data, ev.Data.Error)
			}
			// Its outputs were never written: the message says so after
			// the reason, which they do not replace.
			if msg := ev.Data.Error.Message; !strings.Contains(msg, "timed out after the requested wall time 00:00:01") || !strings.Contains(msg, "not every file was collected") {
				t.Errorf("message %q", msg)
			}
			if len(ev.Data.Artifacts) < 2 {
				t.Errorf("stdout and stderr not collected: %+v", ev.Data.Artifacts)
			}
		})
	}
}

// A cancel of a running job deletes it upstream and the job ends
// cancelled; where the platform has no cancel (Letter) the job runs to
// its end and the log says why.
func TestComputeCancelRunningJob(t *testing.T) {
	t.Parallel()
	for _, m := range computeModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{historyDelay: 50 * time.Millisecond, computeLetter: m.letter})
			b.start(t)
			id := "cancel-" + m.name
			runFor := "30s"
			if m.letter {
				runFor = "2s"
			}
			b.publish(t, "compute", id, computeSpec(t, b, id, "#!/bin/sh\n#SIM runfor "+runFor+"\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n"))
			waitFor(t, 30*time.Second, "the job to run", func() bool { return b.compute.Counters().Get("jobs:running") >= 1 })
			if r := cancel(t, b, id); r.Error != "" {
				t.Fatalf("cancel reply %+v", r)
			}
			ev := b.await(t, id, 30*time.Second)
			if m.letter {
				if ev.Data.Status != "succeeded" {
					t.Fatalf("letter: status %s error %+v", ev.Data.Status, ev.Data.Error)
				}
				if !strings.Contains(b.logs.String(), runner.LogComputeCancelUnsupported) {
					t.Error("the log does not say the platform has no cancel")
				}
				return
			}
			if ev.Data.Status != "cancelled" {
				t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
			}
			if n := b.compute.Counters().Get("jobs:cancelled"); n != 1 {
				t.Errorf("simulator cancelled %d jobs", n)
			}
			if n := b.compute.Counters().Requests(apisim.EndpointComputeCancel); n < 1 {
				t.Errorf("cancel requests = %d", n)
			}
		})
	}
}

// A cancel that reaches the worker after the job ended upstream (but
// before sluice saw it end) keeps the job's real outcome.
func TestComputeCancelAfterEndKeepsOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{computeTime: 200 * time.Millisecond, historyDelay: 50 * time.Millisecond})
	b.start(t, func(c *config.Config) { c.ComputePoll = 2 * time.Second })
	id := "late-cancel"
	b.publish(t, "compute", id, computeSpec(t, b, id, "#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n"))
	waitFor(t, 30*time.Second, "the job to end upstream", func() bool {
		_, ok := b.compute.File("/public/home/alice/" + id + "/result.dat")
		return ok
	})
	if r := cancel(t, b, id); r.Error != "" {
		t.Fatalf("cancel reply %+v", r)
	}
	ev := b.await(t, id, 30*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.compute.Counters().Get("jobs:cancelled"); n != 0 {
		t.Errorf("simulator cancelled %d jobs", n)
	}
}

// A submit whose answer is lost (the platform creates the job, the answer
// is a 500) is resolved by the job list to the job it created, never
// submitted twice; without a job list (Letter) it is submit_ambiguous.
func TestComputeLostSubmitAnswerResolved(t *testing.T) {
	t.Parallel()
	for _, m := range computeModes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{computeLetter: m.letter})
			b.compute.Faults().Set(apisim.EndpointComputeSubmit, apisim.Fault{Error500AfterRate: 1, Times: 1})
			b.start(t)
			id := "lost-answer-" + m.name
			b.publish(t, "compute", id, computeSpec(t, b, id, "#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n"))
			ev := b.await(t, id, 30*time.Second)
			if n := b.compute.SubmitCount(id); n != 1 {
				t.Errorf("submits = %d, want 1", n)
			}
			if m.letter {
				if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeSubmitAmbiguous {
					t.Fatalf("letter: event %+v error %+v", ev.Data, ev.Data.Error)
				}
				return
			}
			if ev.Data.Status != "succeeded" || ev.Data.Upstream == nil || ev.Data.Upstream.JobID == "" {
				t.Fatalf("event %+v error %+v", ev.Data, ev.Data.Error)
			}
		})
	}
}

// A node failure and a lagging statC whose JobState is FAILED both fail
// the job, naming what happened.
func TestComputeSchedulerFailures(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{historyDelay: time.Hour})
	b.start(t)
	for _, c := range []struct{ id, directive, code, words string }{
		{"nodefail", "#SIM nodefail", runner.CodeNodeFailure, "node failure on sim-node01"},
		{"lagfail", "#SIM lagfail", runner.CodeExitStatus, "the scheduler reports it failed"},
		{"detailerror", "#SIM detailerror 1000\nexit 4", runner.CodeExitStatus, "exit code 4"},
	} {
		b.publish(t, "compute", c.id, computeSpec(t, b, c.id, fmt.Sprintf("#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n%s\n", c.directive)))
		ev := b.await(t, c.id, 30*time.Second)
		if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != c.code || !strings.Contains(ev.Data.Error.Message, c.words) {
			t.Errorf("%s: event %+v error %+v", c.id, ev.Data, ev.Data.Error)
		}
	}
}

// A worker restarted while its job was collecting, after the job moved
// from the realtime detail to the history, finds it there and succeeds,
// with the history's usage and without a second submit.
func TestComputeResumeCollectingFromHistory(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{computeTime: 200 * time.Millisecond, historyDelay: 50 * time.Millisecond})
	id := "resume-history"
	spec := computeSpec(t, b, id, "#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n")
	// The job as the killed worker left it: uploaded, submitted, ended.
	dir := "/public/home/alice/" + id
	for name, body := range map[string]string{id + ".sh": "#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n", "params.nml": "alpha=1\n"} {
		if err := os.MkdirAll(filepath.Join(b.compute.Root(), dir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.compute.Root(), dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testenv.Context(t, 30*time.Second)
	client, err := apiclient.NewCompute(apiclient.ComputeConfig{BaseURL: b.simURL, User: "alice", Password: secretComputePass, OrgID: "org-1"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := client.Cluster(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	jobID, err := sess.SubmitJob(ctx, "BASIC", "BASE", apiclient.JobRequest{MapAppJobInfo: map[string]any{
		apiclient.KeyJobName: id, apiclient.KeyQueue: "normal", apiclient.KeyNNode: "1", apiclient.KeyPPN: "4",
		apiclient.KeyWallTime: "00:10:00", apiclient.KeyWorkDir: dir, apiclient.KeySchedFile: dir + "/" + id + ".sh",
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the job to leave the realtime detail", func() bool {
		_, err := sess.Job(ctx, jobID)
		return errors.Is(err, apiclient.ErrJobNotFound)
	})
	b.leaveRecord(t, id, func(r *state.Record) {
		now := time.Now().UTC()
		r.Kind, r.Status, r.Submits, r.SubmittedAt = "compute", state.StatusCollecting, 1, &now
		r.Upstream = state.Upstream{ClusterID: "1001", JobID: jobID, Status: "statR", State: "RUNNING"}
	})
	b.start(t)
	b.publish(t, "compute", id, spec)
	ev := b.await(t, id, 30*time.Second)
	if ev.Data.Status != "succeeded" || ev.Data.Upstream == nil || ev.Data.Upstream.JobID != jobID {
		t.Fatalf("event %+v error %+v", ev.Data, ev.Data.Error)
	}
	if len(ev.Data.Artifacts) != 4 || !strings.Contains(string(ev.Data.Usage), "cpuNuclearHour") {
		t.Errorf("artifacts %+v usage %s", ev.Data.Artifacts, ev.Data.Usage)
	}
	if n := b.compute.SubmitCount(id); n != 1 {
		t.Errorf("submits = %d", n)
	}
}

// A compute job past SLUICE_COMPUTE_TIMEOUT is deleted upstream before it
// fails timeout: it must not go on paying.
func TestComputeTimeoutDeletesUpstream(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.ComputeTimeout = 2 * time.Second })
	id := "given-up"
	b.publish(t, "compute", id, computeSpec(t, b, id, "#!/bin/sh\n#SIM runfor 5m\n"))
	ev := b.await(t, id, 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeTimeout ||
		!strings.Contains(ev.Data.Error.Message, "it was deleted upstream") {
		t.Fatalf("event %+v error %+v", ev.Data, ev.Data.Error)
	}
	if n := b.compute.Counters().Get("jobs:cancelled"); n != 1 {
		t.Errorf("simulator cancelled %d jobs", n)
	}
}

// A cancel whose answer is lost (the platform deleted the job, then
// answered 500) is not assumed either way: the job is read again and ends
// cancelled because the platform shows it deleted.
func TestComputeCancelAnswerLost(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{historyDelay: 50 * time.Millisecond})
	b.compute.Faults().Set(apisim.EndpointComputeCancel, apisim.Fault{Error500AfterRate: 1, Times: 1})
	b.start(t)
	id := "cancel-lost"
	b.publish(t, "compute", id, computeSpec(t, b, id, "#!/bin/sh\n#SIM runfor 5m\n"))
	waitFor(t, 30*time.Second, "the job to run", func() bool { return b.compute.Counters().Get("jobs:running") >= 1 })
	if r := cancel(t, b, id); r.Error != "" {
		t.Fatalf("cancel reply %+v", r)
	}
	ev := b.await(t, id, 30*time.Second)
	if ev.Data.Status != "cancelled" || ev.Data.Upstream == nil || ev.Data.Upstream.Status != "statDE" {
		t.Fatalf("event %+v error %+v", ev.Data, ev.Data.Error)
	}
	if n := b.compute.Counters().Get("jobs:cancelled"); n != 1 {
		t.Errorf("simulator cancelled %d jobs", n)
	}
}

// A compute job its queue cannot run ends with one failed event naming
// the limit, and its message goes to SLUICE_DLQ: nothing was uploaded
// or submitted, nothing is lost.
func TestComputeOverQueueLimitsDeadLettered(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	id := "over-limits"
	spec := computeSpec(t, b, id, "#!/bin/sh\n")
	spec["compute"].(map[string]any)["job"].(map[string]any)["ppn"] = 128
	b.publish(t, "compute", id, spec)
	ev := b.await(t, id, 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeInvalidSpec ||
		!strings.Contains(ev.Data.Error.Message, "compute.job.ppn: ppn 128 > queue normal's 64 cores per node") {
		t.Fatalf("event %+v error %+v, want failed invalid_spec naming ppn and the limit", ev.Data, ev.Data.Error)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !deadLettered(b.deadLetters(t), id) {
		if time.Now().After(deadline) {
			t.Fatal("the job's message is not in SLUICE_DLQ")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := b.compute.Counters()
	if up, sub := c.Requests(apisim.EndpointComputeUpload)+c.Requests(apisim.EndpointComputeBurst), c.Requests(apisim.EndpointComputeSubmit); up != 0 || sub != 0 {
		t.Errorf("%d uploads and %d submits, want none", up, sub)
	}
}

// deadLettered reports whether msgs hold job id's message.
func deadLettered(msgs []*jetstream.RawStreamMsg, id string) bool {
	for _, m := range msgs {
		if m.Header.Get(contract.HeaderJobID) == id {
			return true
		}
	}
	return false
}
