package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// claimed begins a first delivery of a job of kind and claims its submit,
// as a delivery does right before it sends it: the record is at
// "submitting". The caller unregisters the job.
func (b *bundle) claimed(t *testing.T, kind string, spec []byte) (*job, *apiclient.ClusterSession) {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	j := b.begun(t, kind, spec, 1)
	sess, err := b.r.openSession(ctx, j, "", "", "open cluster session")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.r.claimSubmit(ctx, j, func(rec *state.Record) {
		rec.Upstream.ClusterID = sess.ClusterID()
		if kind == "compute" {
			rec.Upstream.JobName = platformJobName(j)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return j, sess
}

// begun begins delivery number delivered of a job of kind, which must go
// on. The caller unregisters the job.
func (b *bundle) begun(t *testing.T, kind string, spec []byte, delivered uint64) *job {
	t.Helper()
	j, _, done := b.r.begin(testenv.Context(t, 30*time.Second), b.deliverKind(t, kind, spec, delivered))
	if done {
		t.Fatalf("delivery %d did not go on", delivered)
	}
	return j
}

// submitEarlier plays a first delivery of compute job spec that claimed
// its submit and sent it under the platform job name name ("" for the
// name sluice gives it), then stopped before recording the answer: the
// record is at "submitting" and the platform holds the job. It returns
// the platform's job id and the session.
func (b *bundle) submitEarlier(t *testing.T, spec []byte, name string) (string, *apiclient.ClusterSession) {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	first, sess := b.claimed(t, "compute", spec)
	defer first.unregister()
	if err := b.r.uploadInputs(ctx, first, sess, "compute", first.spec.Compute.Inputs); err != nil {
		t.Fatal(err)
	}
	schedID, err := sess.SchedulerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := first.spec.Compute
	req := c.Request(jobspec.ComputeTarget{JobID: first.id, SchedulerID: schedID, ClusterID: sess.ClusterID()})
	req.MapAppJobInfo[apiclient.KeyJobName] = platformJobName(first)
	if name != "" {
		req.MapAppJobInfo[apiclient.KeyJobName] = name
	}
	jobID, err := sess.SubmitJob(ctx, c.Template.Type, c.Template.Name, req)
	if err != nil {
		t.Fatal(err)
	}
	return jobID, sess
}

// upstreamPhase is the phase the platform shows for its job id, in the
// realtime detail or, once the job left it, in the history.
func upstreamPhase(t *testing.T, sess *apiclient.ClusterSession, id string) apiclient.JobPhase {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	d, err := sess.Job(ctx, id)
	if errors.Is(err, apiclient.ErrJobNotFound) {
		var h *apiclient.HistoryRecord
		if h, err = sess.HistoryJob(ctx, id, apiclient.HistoryQuery{Since: time.Now().Add(-time.Hour)}); err == nil {
			d = h.Detail()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return apiclient.JobPhaseOf(d)
}

// TestComputeEndedAtSubmittingCancelsItsJob ends a compute job left at
// "submitting", whose first submit created a platform job, by a cancel
// and by SLUICE_MAX_DELIVER: the job created upstream is found and
// cancelled before the job ends, not left queued and billed.
func TestComputeEndedAtSubmittingCancelsItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name      string
		cancel    bool
		delivered uint64
		want      state.Status
	}{
		{"cancel", true, 2, state.StatusCancelled},
		{"too many deliveries", false, DefaultMaxDeliver + 1, state.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := "compute-end-submitting-" + map[bool]string{true: "cancel", false: "toomany"}[tc.cancel]
			spec := b.computeSpec(t, id)
			upstream, sess := b.submitEarlier(t, spec, "")
			if tc.cancel {
				b.cancel(t, id)
			}
			out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, tc.delivered))
			rec := b.record(t, id)
			if out.Action == consumer.Retry || rec.Status != tc.want {
				t.Fatalf("settled %v, record %+v, want %s", out.Action, rec, tc.want)
			}
			if p := upstreamPhase(t, sess, upstream); p != apiclient.JobCancelled {
				t.Fatalf("the job's platform job %s is %s after the job ended %s, want cancelled", upstream, p, rec.Status)
			}
		})
	}
}

// TestComputeSubmitLandingLateIsCancelled records a submit whose answer
// lands after another delivery ended the job: the platform job it created
// belongs to no live job and is cancelled at once.
func TestComputeSubmitLandingLateIsCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	id := "compute-late-submit"
	spec := b.computeSpec(t, id)
	upstream, sess := b.submitEarlier(t, spec, "")
	j := b.begun(t, "compute", spec, 2)
	defer j.unregister()
	// Another delivery ends the job meanwhile.
	b.write(t, id, func(rec *state.Record) { rec.Status = state.StatusCancelled })
	if err := b.r.adoptSubmitted(ctx, j, sess, upstream); err == nil {
		t.Fatal("recorded a submit into a finished job")
	}
	if p := upstreamPhase(t, sess, upstream); p != apiclient.JobCancelled {
		t.Fatalf("the late submit's platform job %s is %s, want cancelled", upstream, p)
	}
}

// TestComputeNeverAdoptsAnotherJobsRun leaves compute job B at
// "submitting" (its submit answered before the platform acted) while job
// A, with the same compute.job.name, runs upstream under that name: B
// must not take A's platform job for its own, nor touch it.
func TestComputeNeverAdoptsAnotherJobsRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	named := func(id string) []byte { return b.namedComputeSpec(t, id, "nightly") }
	// A's run, submitted under the name the spec chose.
	runA, sess := b.submitEarlier(t, named("compute-name-a"), "nightly")
	// B claimed its submit, which created nothing.
	idB := "compute-name-b"
	specB := named(idB)
	first, _ := b.claimed(t, "compute", specB)
	first.unregister()

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	outs := make(chan consumer.Outcome, 1)
	go func() { outs <- b.r.Handle(runCtx, b.deliverKind(t, "compute", specB, 2)) }()
	b.waitStatus(t, idB, state.StatusSubmitted)
	stop()
	<-outs
	if rec := b.record(t, idB); rec.Upstream.JobID == runA {
		t.Fatalf("job B adopted job A's platform job %s", runA)
	}
	if p := upstreamPhase(t, sess, runA); p == apiclient.JobCancelled {
		t.Fatalf("job A's platform job %s was cancelled by job B", runA)
	}
}

// namedComputeSpec is compute job id's spec with compute.job.name name.
func (b *bundle) namedComputeSpec(t *testing.T, id, name string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b.computeSpec(t, id), &m); err != nil {
		t.Fatal(err)
	}
	m["compute"].(map[string]any)["job"].(map[string]any)["name"] = name
	spec, _ := json.Marshal(m)
	return spec
}

// submitBeforeUpgrade plays a delivery of the version before platform
// job names carried the job id: it submitted spec under its
// compute.job.name alone and stopped before recording the answer (its
// record at "submitting" names no platform job name).
func (b *bundle) submitBeforeUpgrade(t *testing.T, id string, spec []byte, name string) (string, *apiclient.ClusterSession) {
	t.Helper()
	run, sess := b.submitEarlier(t, spec, name)
	b.write(t, id, func(rec *state.Record) { rec.Upstream.JobName = "" })
	return run, sess
}

// TestComputeUpgradeFindsJobSubmittedUnderOldName resumes a job the
// previous version left at "submitting" after submitting it under the
// name the spec chose: the one platform job of that name is adopted, no
// second one is paid; with two of that name (another job's too) it
// cannot tell which, and fails submit_ambiguous rather than pay twice or
// touch the other's.
func TestComputeUpgradeFindsJobSubmittedUnderOldName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-upgrade-one"
	spec := b.namedComputeSpec(t, id, "weekly")
	run, _ := b.submitBeforeUpgrade(t, id, spec, "weekly")
	j := &job{id: id, spec: mustDecode(t, spec)}
	out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 2))
	rec := b.record(t, id)
	if out.Action != consumer.Ack || rec.Status != state.StatusSucceeded || rec.Upstream.JobID != run {
		t.Fatalf("settled %v, record %s with platform job %s (%+v), want success of %s", out.Action, rec.Status, rec.Upstream.JobID, rec.Error, run)
	}
	if n := b.compute.SubmitCount(platformJobName(j)); n != 0 {
		t.Fatalf("%d submits under %s after the upgrade, want 0: the job was paid twice", n, platformJobName(j))
	}

	other, sess := b.submitEarlier(t, b.namedComputeSpec(t, "compute-upgrade-other", "monthly"), "monthly")
	id = "compute-upgrade-two"
	spec = b.namedComputeSpec(t, id, "monthly")
	b.submitBeforeUpgrade(t, id, spec, "monthly")
	j = &job{id: id, spec: mustDecode(t, spec)}
	b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 2))
	rec = b.record(t, id)
	if rec.Status != state.StatusFailed || rec.Error == nil || rec.Error.Code != CodeSubmitAmbiguous {
		t.Fatalf("record %s (%+v), want failed %s", rec.Status, rec.Error, CodeSubmitAmbiguous)
	}
	if n := b.compute.SubmitCount(platformJobName(j)); n != 0 {
		t.Fatalf("%d submits under %s after the upgrade, want 0", n, platformJobName(j))
	}
	if p := upstreamPhase(t, sess, other); p == apiclient.JobCancelled {
		t.Fatalf("another job's platform job %s was cancelled", other)
	}
}

// mustDecode decodes a compute spec.
func mustDecode(t *testing.T, spec []byte) *jobspec.Spec {
	t.Helper()
	s, err := jobspec.Decode(spec, jobspec.KindCompute)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestContainerCreateLandingLateIsDeleted records a create whose answer
// lands after another delivery ended the job: its instance belongs to no
// live job and is deleted at once, not left billing until its timeout.
func TestContainerCreateLandingLateIsDeleted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	id := "container-late-create"
	spec := containerSpec(id, "echo late\n")
	j, sess := b.claimed(t, "container", spec)
	defer j.unregister()
	workDir := b.r.workDir(j, sess)
	instance, err := sess.CreateInstance(ctx, j.spec.Container.Request(jobspec.ContainerTarget{
		Name: InstanceName(id), WorkDir: workDir, StartScript: ContainerStartScript(id, workDir, j.spec.Container.Script),
	}))
	if err != nil {
		t.Fatal(err)
	}
	// Another delivery ends the job before the create's answer lands.
	b.write(t, id, func(rec *state.Record) { rec.Status = state.StatusCancelled })
	if err := b.r.recordInstance(ctx, ctx, j, sess, instance); err == nil {
		t.Fatal("recorded an instance into a finished job")
	}
	if alive := b.compute.ContainerAlive(); len(alive) != 0 {
		t.Fatalf("instances alive after the job ended: %v", alive)
	}
}

// containerSpec is a container job's spec running script.
func containerSpec(id, script string) []byte {
	spec, _ := json.Marshal(map[string]any{
		"id": id, "kind": "container",
		"container": map[string]any{
			"instance": map[string]any{
				"image": "registry.test:5000/gpu/admin/base/torch:2.1", "version": "torch:2.1",
				"accelerator": "gpu", "resource_group": "TeslaM40", "cpus": 4, "gpus": 1, "ram_mb": 16384,
				"timeout": "00:10:00",
			},
			"script": script,
		},
	})
	return spec
}

// TestContainerStaleExitFileIsNotRead creates a container job's instance
// where an earlier attempt left its exit status file: the job's outcome
// is the new script's exit status, not the file the earlier one wrote.
func TestContainerStaleExitFileIsNotRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	id := "container-stale-exit"
	spec := containerSpec(id, "exit 3\n")
	sess, err := b.r.cfg.Compute.Cluster(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	files := filesOf(path.Join(sess.HomePath(), "sluice", id), id)
	err = sess.Upload(ctx, path.Dir(files.exit), path.Base(files.exit), true, func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("0\n")), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b.r.Handle(ctx, b.deliverKind(t, "container", spec, 1))
	rec := b.record(t, id)
	if rec.Status != state.StatusFailed || rec.Upstream.ExitCode == nil || *rec.Upstream.ExitCode != "3" {
		t.Fatalf("record %s, exit code %q, error %+v: want the new script's exit status 3", rec.Status, *cmp.Or(rec.Upstream.ExitCode, new(string)), rec.Error)
	}
}

// TestComputeTwoOwnSubmitsAdoptTheFirst leaves a compute job at
// "submitting" with two platform jobs of its own (two deliveries each
// sent the submit): the next delivery adopts the earlier one, cancels the
// other, and sends no third.
func TestComputeTwoOwnSubmitsAdoptTheFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-two-own"
	spec := b.computeSpec(t, id)
	firstRun, sess := b.submitEarlier(t, spec, "")
	secondRun, _ := b.submitEarlier(t, spec, "")
	out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 3))
	rec := b.record(t, id)
	if out.Action != consumer.Ack || rec.Status != state.StatusSucceeded || rec.Upstream.JobID != firstRun {
		t.Fatalf("settled %v, record %s with platform job %s (%+v), want success of %s", out.Action, rec.Status, rec.Upstream.JobID, rec.Error, firstRun)
	}
	if p := upstreamPhase(t, sess, secondRun); p != apiclient.JobCancelled {
		t.Fatalf("the second platform job %s is %s, want cancelled", secondRun, p)
	}
	if n := b.compute.SubmitCount(id); n != 2 {
		t.Fatalf("%d submits upstream, want the 2 made before", n)
	}
}

// TestComputeJobNameTooLongIsRefused gives a compute job a name that,
// with the job id sluice appends, is longer than the platform keeps: the
// spec is refused, naming the field, before anything is submitted.
func TestComputeJobNameTooLongIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-long-name-" + strings.Repeat("i", 100)
	spec := b.namedComputeSpec(t, id, strings.Repeat("n", maxPlatformJobName-len(id)))
	j := &job{id: id, spec: mustDecode(t, spec)}
	b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 1))
	rec := b.record(t, id)
	if rec.Status != state.StatusFailed || rec.Error == nil || rec.Error.Code != CodeInvalidSpec ||
		!strings.Contains(rec.Error.Message, "compute.job.name") {
		t.Fatalf("record %s (%+v), want failed %s naming compute.job.name", rec.Status, rec.Error, CodeInvalidSpec)
	}
	if n := b.compute.SubmitCount(platformJobName(j)); n != 0 {
		t.Fatalf("%d submits of a name the platform cannot keep, want 0", n)
	}
}

// TestComputeEndedAtSubmittingOutlastsAFailedList cancels a compute job
// left at "submitting" while the platform's job list fails one call
// through (every attempt of the client): the job is not ended
// job_not_cancelled with its platform job left queued; the list is asked
// again and the platform job cancelled.
func TestComputeEndedAtSubmittingOutlastsAFailedList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-end-list-fails"
	spec := b.computeSpec(t, id)
	upstream, sess := b.submitEarlier(t, spec, "")
	b.cancel(t, id)
	b.compute.Faults().Set(apisim.EndpointComputeJobs, apisim.Fault{Error5xxRate: 1, Times: 4})
	b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 2))
	if rec := b.record(t, id); rec.Status != state.StatusCancelled {
		t.Fatalf("record %s (%+v), want cancelled", rec.Status, rec.Error)
	}
	if p := upstreamPhase(t, sess, upstream); p != apiclient.JobCancelled {
		t.Fatalf("the job's platform job %s is %s, want cancelled", upstream, p)
	}
}

// TestComputeLostSubmitOutlastsAFailedList loses the answer of a compute
// submit the platform acted on while the job list fails one call through
// (every attempt of the client): the job is not ended submit_ambiguous
// with its platform job running unobserved; the list is asked again and
// the job adopted, with no second submit.
func TestComputeLostSubmitOutlastsAFailedList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-lost-list-fails"
	spec := b.computeSpec(t, id)
	b.compute.Faults().Set(apisim.EndpointComputeSubmit, apisim.Fault{Error500AfterRate: 1, Times: 1})
	b.compute.Faults().Set(apisim.EndpointComputeJobs, apisim.Fault{Error5xxRate: 1, Times: 4})
	out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 1))
	if rec := b.record(t, id); out.Action != consumer.Ack || rec.Status != state.StatusSucceeded {
		t.Fatalf("settled %v, record %s (%+v), want success of the job the lost submit created", out.Action, rec.Status, rec.Error)
	}
	if n := b.compute.SubmitCount(id); n != 1 {
		t.Fatalf("%d submits upstream, want 1", n)
	}
}

// TestComputeUpgradeCancelCancelsJobOfOldName cancels a job the previous
// version left at "submitting" after submitting it under the spec's name
// alone: the one platform job of that name is cancelled before the job
// ends, not left queued.
func TestComputeUpgradeCancelCancelsJobOfOldName(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-upgrade-cancel"
	spec := b.namedComputeSpec(t, id, "yearly")
	run, sess := b.submitBeforeUpgrade(t, id, spec, "yearly")
	b.cancel(t, id)
	b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 2))
	if rec := b.record(t, id); rec.Status != state.StatusCancelled {
		t.Fatalf("record %s (%+v), want cancelled", rec.Status, rec.Error)
	}
	if p := upstreamPhase(t, sess, run); p != apiclient.JobCancelled {
		t.Fatalf("the job's platform job %s of the old name is %s, want cancelled", run, p)
	}
}
