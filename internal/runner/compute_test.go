package runner

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// computeSpec is a compute job's spec whose script, put in the S3 store
// first, writes result.dat; edits change its job section.
func (b *bundle) computeSpec(t *testing.T, id string, edits ...func(job map[string]any)) []byte {
	t.Helper()
	script := "#!/bin/sh\necho simulating\n#SIM output result.dat 1K\n"
	if _, err := b.s3.Client.PutObject(testenv.Context(t, 10*time.Second), &s3.PutObjectInput{
		Bucket: aws.String(b.s3.Bucket), Key: aws.String("scripts/" + id + ".sh"), Body: strings.NewReader(script),
	}); err != nil {
		t.Fatal(err)
	}
	dir := computeDir(id)
	job := map[string]any{
		"name": id, "queue": "normal", "nodes": 1, "ppn": 4, "wall_time": "00:10:00",
		"work_dir": dir, "script": dir + "/" + id + ".sh",
	}
	for _, edit := range edits {
		edit(job)
	}
	spec, _ := json.Marshal(map[string]any{
		"id": id, "kind": "compute",
		"compute": map[string]any{
			"template": map[string]string{"type": "BASIC", "name": "BASE"},
			"job":      job,
			"inputs":   []map[string]any{{"from": "s3://" + b.s3.Bucket + "/scripts/" + id + ".sh", "to": dir, "cover": true}},
			"outputs":  []string{dir + "/result.dat"},
		},
	})
	return spec
}

// computeDir is the work directory of compute job id on the cluster.
func computeDir(id string) string { return "/public/home/alice/" + id }

// stopWhileRunning runs a first delivery of compute job id until its
// record shows "running", then stops it as a worker that stops does: the
// record stays where it was, with the job upstream.
func (b *bundle) stopWhileRunning(t *testing.T, id string, spec []byte) {
	t.Helper()
	ctx, stop := context.WithCancel(testenv.Context(t, 30*time.Second))
	done := make(chan consumer.Outcome, 1)
	d := b.deliverKind(t, "compute", spec, 1)
	go func() { done <- b.r.Handle(ctx, d) }()
	b.waitStatus(t, id, state.StatusRunning)
	stop()
	if out := <-done; out.Action == consumer.Ack {
		t.Fatalf("the stopped delivery settled %v, want the job handed back", out.Action)
	}
}

// waitUpstreamEnd waits until compute job id has written its output on
// the cluster: it ended upstream.
func (b *bundle) waitUpstreamEnd(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := b.compute.File(computeDir(id) + "/result.dat"); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("compute job %s did not end upstream in 30s", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestComputeSubmitAnsweredToNoOne delivers a compute job again after a
// worker stopped inside its submit: the record is at "submitting" and the
// platform holds the job, whose answer nobody recorded. The delivery
// finds that job and adopts it rather than submitting, and paying, again.
func TestComputeSubmitAnsweredToNoOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	id := "compute-lost-answer"
	spec := b.computeSpec(t, id)
	b.submitEarlier(t, spec, "")

	out := b.r.Handle(ctx, b.deliverKind(t, "compute", spec, 2))
	rec := b.record(t, id)
	if out.Action != consumer.Ack || rec.Status != state.StatusSucceeded || rec.Submits != 1 || !hasArtifact(rec, "result.dat") {
		t.Fatalf("settled %v, record %+v, want the adopted job's success after one submit", out.Action, rec)
	}
	if n := b.compute.SubmitCount(id); n != 1 {
		t.Fatalf("%d submits upstream, want 1", n)
	}
}

// TestComputeResumeAfterCheckpoint delivers a compute job again after a
// worker stopped at each checkpoint past its submit: it adopts the job
// upstream, never submits again, and ends succeeded with its outputs.
func TestComputeResumeAfterCheckpoint(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, status := range []state.Status{state.StatusSubmitted, state.StatusRunning, state.StatusCollecting} {
		t.Run(string(status), func(t *testing.T) {
			t.Parallel()
			id := "compute-resume-" + string(status)
			spec := b.computeSpec(t, id)
			b.stopWhileRunning(t, id, spec)
			if status == state.StatusCollecting {
				b.waitUpstreamEnd(t, id)
			}
			b.write(t, id, func(rec *state.Record) { rec.Status = status })
			out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 2))
			if out.Action != consumer.Ack {
				t.Fatalf("Handle settled %v, want an ack", out.Action)
			}
			rec := b.record(t, id)
			if rec.Status != state.StatusSucceeded || !hasArtifact(rec, "result.dat") || rec.Attempts != 2 {
				t.Fatalf("record %+v, want succeeded with result.dat at attempt 2", rec)
			}
			if n := b.compute.SubmitCount(id); n != 1 {
				t.Fatalf("%d submits upstream, want 1", n)
			}
		})
	}
}

// hasArtifact reports whether rec lists an artifact named name.
func hasArtifact(rec *state.Record, name string) bool {
	for _, a := range rec.Artifacts {
		if strings.HasSuffix(a.Key, "/"+name) {
			return true
		}
	}
	return false
}

// TestComputeCancelAtEachStep cancels a compute job at each of its steps:
// before its submit it ends cancelled with nothing submitted; while it
// runs it is cancelled upstream; a job that ended first keeps its outcome.
func TestComputeCancelAtEachStep(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("before the submit", func(t *testing.T) {
		t.Parallel()
		for _, status := range []state.Status{state.StatusReceived, state.StatusSubmitting} {
			id := "compute-cancel-" + string(status)
			spec := b.computeSpec(t, id)
			b.write(t, id, func(rec *state.Record) { rec.Kind, rec.Status, rec.Attempts = "compute", status, 1 })
			b.cancel(t, id)
			out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 2))
			if rec := b.record(t, id); out.Action != consumer.Ack || rec.Status != state.StatusCancelled || b.compute.SubmitCount(id) != 0 {
				t.Fatalf("%s: settled %v, record %+v with %d submits, want cancelled unsubmitted", status, out.Action, rec, b.compute.SubmitCount(id))
			}
		}
	})
	t.Run("while the job runs", func(t *testing.T) {
		t.Parallel()
		id := "compute-cancel-running"
		done := make(chan consumer.Outcome, 1)
		d := b.deliverKind(t, "compute", b.computeSpec(t, id), 1)
		go func() { done <- b.r.Handle(testenv.Context(t, 30*time.Second), d) }()
		b.waitStatus(t, id, state.StatusRunning)
		b.cancel(t, id)
		out := <-done
		if rec := b.record(t, id); out.Action != consumer.Ack || rec.Status != state.StatusCancelled || hasArtifact(rec, "result.dat") {
			t.Fatalf("settled %v, record %+v, want cancelled before its outputs", out.Action, rec)
		}
	})
	t.Run("after the job ended", func(t *testing.T) {
		t.Parallel()
		id := "compute-cancel-collecting"
		spec := b.computeSpec(t, id)
		b.stopWhileRunning(t, id, spec)
		b.waitUpstreamEnd(t, id)
		b.write(t, id, func(rec *state.Record) { rec.Status = state.StatusCollecting })
		b.cancel(t, id)
		out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 2))
		if rec := b.record(t, id); out.Action != consumer.Ack || rec.Status != state.StatusSucceeded || !hasArtifact(rec, "result.dat") {
			t.Fatalf("settled %v, record %+v, want the job's success", out.Action, rec)
		}
	})
}

// TestComputeResumedQueuedJobGetsTheHistorySearch resumes a compute job
// whose record shows the platform had it queued, while neither the job
// detail nor the history has it (a history that lags): it is a job seen
// before, which gets the 5-minute search, not the three polls of a job the
// platform never showed.
func TestComputeResumedQueuedJobGetsTheHistorySearch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-resume-queued"
	spec := b.computeSpec(t, id)
	b.write(t, id, func(rec *state.Record) {
		now := time.Now().UTC()
		rec.Kind, rec.Status, rec.Attempts, rec.SubmittedAt = "compute", state.StatusSubmitted, 1, &now
		rec.Upstream.JobID, rec.Upstream.Status = "424242", "statQ"
	})
	ctx, stop := context.WithCancel(testenv.Context(t, 30*time.Second))
	defer stop()
	outs := make(chan consumer.Outcome, 1)
	go func() { outs <- b.r.Handle(ctx, b.deliverKind(t, "compute", spec, 2)) }()
	jobs := b.compute.Counters().Requests(apisim.EndpointComputeJob)
	for b.compute.Counters().Requests(apisim.EndpointComputeJob) < jobs+2*notFoundPolls {
		select {
		case out := <-outs:
			rec := b.record(t, id)
			t.Fatalf("the job ended after %d polls: settled %v, record %s %+v", b.compute.Counters().Requests(apisim.EndpointComputeJob)-jobs, out.Action, rec.Status, rec.Error)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop()
	<-outs
	if rec := b.record(t, id); rec.Status.Terminal() {
		t.Fatalf("record %+v, want the job still searched for", rec)
	}
}

// TestComputeRedeliveryKeepsUploadedInputs delivers a compute job again
// after its first delivery uploaded its inputs and stopped inside the
// submit window, having sent nothing: the platform holds each input whole (same size), so none is
// uploaded again.
func TestComputeRedeliveryKeepsUploadedInputs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	id := "compute-inputs-kept"
	spec := b.computeSpec(t, id)
	first, sess := b.claimed(t, "compute", spec)
	if err := b.r.uploadInputs(ctx, first, sess, "compute", first.spec.Compute.Inputs); err != nil {
		t.Fatal(err)
	}
	first.unregister()
	uploads := b.compute.Counters().Requests(apisim.EndpointComputeUpload)

	out := b.r.Handle(ctx, b.deliverKind(t, "compute", spec, 2))
	if rec := b.record(t, id); out.Action != consumer.Ack || rec.Status != state.StatusSucceeded {
		t.Fatalf("settled %v, record %s %+v, want success", out.Action, rec.Status, rec.Error)
	}
	if n := b.compute.Counters().Requests(apisim.EndpointComputeUpload) - uploads; n != 0 {
		t.Fatalf("the redelivery uploaded %d inputs again, want none", n)
	}
}

// TestComputeRedeliveryCoversAStaleInputOfItsSize redelivers a compute
// job whose first delivery stopped before it uploaded its input, where a
// file of the input's name and size (another run's, other bytes) already
// lies: the job's input is uploaded over it, not taken for an earlier
// delivery's upload by its size.
func TestComputeRedeliveryCoversAStaleInputOfItsSize(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	id := "compute-inputs-stale"
	spec := b.computeSpec(t, id)
	b.begun(t, "compute", spec, 1).unregister()
	src, err := b.s3.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.s3.Bucket), Key: aws.String("scripts/" + id + ".sh")})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(src.Body)
	_ = src.Body.Close()
	sess, err := b.r.cfg.Compute.Cluster(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	stale := strings.Repeat("x", len(want))
	if err := uploadText(ctx, sess, computeDir(id)+"/"+id+".sh", stale); err != nil {
		t.Fatal(err)
	}

	j := b.begun(t, "compute", spec, 2)
	defer j.unregister()
	if err := b.r.uploadInputs(ctx, j, sess, "compute", j.spec.Compute.Inputs); err != nil {
		t.Fatal(err)
	}
	rc, err := sess.Download(ctx, computeDir(id)+"/"+id+".sh")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	_ = rc.Close()
	if string(got) != string(want) {
		t.Fatalf("the platform holds %q for the job's input, want its source %q", got, want)
	}
}
