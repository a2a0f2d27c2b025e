package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// deleteBucket takes bucket away (it holds no object yet), so that the
// store refuses every write with NoSuchBucket; createBucket gives it back.
func (b *bundle) deleteBucket(t *testing.T, bucket string) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := b.s3.Client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("delete bucket %s: %v", bucket, err)
	}
}

func (b *bundle) createBucket(t *testing.T, bucket string) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := b.s3.Client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", bucket, err)
	}
}

// TestStoreRefusalWithinLimitLosesNothing: a job whose task ended while
// the store refuses its writes (the bucket deleted) keeps its task, shows
// artifact_store_refused as its last error, and succeeds once the bucket
// is back, before SLUICE_STORE_REFUSAL_LIMIT, with one submit.
func TestStoreRefusalWithinLimitLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 2 * time.Second})
	b.start(t, func(c *config.Config) { c.StoreRefusalLimit, c.TaskTimeout = time.Hour, time.Hour })

	const prompt = "a harbour while the bucket is gone"
	b.publish(t, "video", "refused-short", videoSpec("refused-short", prompt))
	b.awaitStatus(t, "refused-short", state.StatusSubmitted, time.Minute)
	b.deleteBucket(t, b.s3.Bucket)
	var rec *state.Record
	waitFor(t, 2*time.Minute, "the refusal in the job's last error", func() bool {
		rec = b.record(t, "refused-short")
		return rec.LastError != nil && rec.LastError.Code == runner.CodeStoreRefused
	})
	if rec.LastError.Step != state.StatusCollecting || !strings.Contains(rec.LastError.Message, "NoSuchBucket") || rec.Upstream.TaskID == "" {
		t.Errorf("record while the store refuses: status %s, last error %+v, task %q", rec.Status, rec.LastError, rec.Upstream.TaskID)
	}

	b.createBucket(t, b.s3.Bucket)
	ev := b.await(t, "refused-short", 2*time.Minute)
	if ev.Data.Status != string(state.StatusSucceeded) || len(ev.Data.Artifacts) != 1 {
		t.Fatalf("job = %s %+v with %d artifacts, want succeeded with 1", ev.Data.Status, ev.Data.Error, len(ev.Data.Artifacts))
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
}

// TestStoreRefusalPastLimitFailsAndRetryReusesTheTask: a store that
// refuses for longer than SLUICE_STORE_REFUSAL_LIMIT fails the job
// artifact_store_refused (not artifact_fetch_failed); once the bucket is
// back, enqueue retry queues X-r1 over the same task, which copies the
// results without a second submit.
func TestStoreRefusalPastLimitFailsAndRetryReusesTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 2 * time.Second})
	b.start(t, func(c *config.Config) { c.StoreRefusalLimit, c.TaskTimeout = 3*time.Second, time.Hour })

	const prompt = "a ferry while the bucket stays gone"
	b.publish(t, "video", "refused-long", videoSpec("refused-long", prompt))
	b.awaitStatus(t, "refused-long", state.StatusSubmitted, time.Minute)
	b.deleteBucket(t, b.s3.Bucket)
	ev := b.await(t, "refused-long", 2*time.Minute)
	if ev.Data.Status != string(state.StatusFailed) || ev.Data.Error == nil ||
		ev.Data.Error.Code != runner.CodeStoreRefused || ev.Data.Error.Stage != state.StageCollect {
		t.Fatalf("job = %s %+v, want failed %s at collect", ev.Data.Status, ev.Data.Error, runner.CodeStoreRefused)
	}
	task := b.record(t, "refused-long").Upstream.TaskID

	b.createBucket(t, b.s3.Bucket)
	out, code := b.enqueue(t, "", "retry", "refused-long")
	if code != 0 || !strings.Contains(out, "refused-long-r1") || !strings.Contains(out, task) {
		t.Fatalf("enqueue retry = %d:\n%s\nwant refused-long-r1 reusing task %s", code, out, task)
	}
	ev = b.await(t, "refused-long-r1", 2*time.Minute)
	if ev.Data.Status != string(state.StatusSucceeded) || len(ev.Data.Artifacts) != 1 ||
		ev.Data.Upstream == nil || ev.Data.Upstream.TaskID != task {
		t.Fatalf("retry = %s %+v upstream %+v, want succeeded from task %s", ev.Data.Status, ev.Data.Error, ev.Data.Upstream, task)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1 (the retry took the task over)", n)
	}
}

// TestStoreRefusalRetryReusesTheComputeJob: the same for a compute job:
// its retry polls the original's platform job and copies its files
// without submitting again. The artifacts go to a bucket of their own,
// so that it can be deleted while the inputs stay.
func TestStoreRefusalRetryReusesTheComputeJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{computeTime: 2 * time.Second})
	const artifacts = "sluice-artifacts"
	b.start(t, func(c *config.Config) { c.StoreRefusalLimit, c.S3Bucket = 3*time.Second, artifacts })
	const id = "refused-compute"
	b.publish(t, "compute", id, computeSpec(t, b, id, "#!/bin/sh\necho done\n#SIM output result.dat 2K\ncp params.nml params-copy.nml\n"))
	b.awaitStatus(t, id, state.StatusSubmitted, time.Minute)
	b.deleteBucket(t, artifacts)
	ev := b.await(t, id, 2*time.Minute)
	if ev.Data.Status != string(state.StatusFailed) || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeStoreRefused {
		t.Fatalf("job = %s %+v, want failed %s", ev.Data.Status, ev.Data.Error, runner.CodeStoreRefused)
	}
	job := b.record(t, id).Upstream.JobID

	b.createBucket(t, artifacts)
	out, code := b.enqueue(t, "", "retry", id)
	if code != 0 || !strings.Contains(out, id+"-r1") || !strings.Contains(out, job) {
		t.Fatalf("enqueue retry = %d:\n%s\nwant %s-r1 reusing compute job %s", code, out, id, job)
	}
	ev = b.await(t, id+"-r1", 2*time.Minute)
	if ev.Data.Status != string(state.StatusSucceeded) || len(ev.Data.Artifacts) != 4 ||
		ev.Data.Upstream == nil || ev.Data.Upstream.JobID != job {
		t.Fatalf("retry = %s %+v upstream %+v, %d artifacts; want succeeded from job %s with 4",
			ev.Data.Status, ev.Data.Error, ev.Data.Upstream, len(ev.Data.Artifacts), job)
	}
	if n := b.compute.SubmitCount(id); n != 1 {
		t.Errorf("compute submits = %d, want 1 (the retry took the job over)", n)
	}
}
