package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// leaveRecord writes the state record a worker killed at some step would
// have left for id, as the first delivery of the job.
func (b *bundle) leaveRecord(t *testing.T, id string, fn func(*state.Record)) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	if err := contract.Ensure(ctx, b.nats.JS, contract.Options{AckWait: b.cfg.AckWait}); err != nil {
		t.Fatal(err)
	}
	_, err := state.NewStore(b.kv(t), "killed-worker", nil).Update(ctx, id, func(r *state.Record) error {
		r.Attempts = 1
		fn(r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// A synchronous speech job whose worker died after it recorded the
// synthesis (and before it copied the audio) is collected from the record:
// the speech is not paid a second time.
func TestSyncSpeechAfterCrashIsCollectedNotResubmitted(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	text := "resume sync [sim:size=40000]"
	media, err := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: b.simURL, APIKey: secretMediaKey})
	if err != nil {
		t.Fatal(err)
	}
	task, err := media.SubmitSpeechSync(testenv.Context(t, 10*time.Second), apiclient.SpeechRequest{
		Model: "speech-model", Input: apiclient.SpeechInput{Text: text, Voice: "alloy"},
	})
	if err != nil || task.Output.TaskStatus != apiclient.TaskSucceeded {
		t.Fatalf("sync speech: %+v, %v", task, err)
	}
	b.leaveRecord(t, "sync-resume", func(r *state.Record) {
		now := time.Now().UTC()
		r.Kind, r.Status, r.Submits, r.SubmittedAt = "speech", state.StatusSubmitted, 1, &now
		r.Upstream = state.Upstream{TaskID: task.Output.TaskID, RequestID: task.RequestID, Status: string(task.Output.TaskStatus)}
		r.Results = task.Output.Results
	})
	b.start(t)
	b.publish(t, "speech", "sync-resume", speechSpec("sync-resume", text, "sync"))
	ev := b.await(t, "sync-resume", 30*time.Second)
	if ev.Data.Status != "succeeded" || len(ev.Data.Artifacts) != 1 {
		t.Fatalf("event %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	if n := b.media.SubmitCount(text); n != 1 {
		t.Errorf("submits = %d, want 1: the resumed job synthesized again", n)
	}
	if got, want := b.objectSHA(t, ev.Data.Artifacts[0]), sha(apisim.ResultBytes(task.Output.TaskID, 0, 40000)); got != want {
		t.Errorf("artifact sha %s, want %s", got, want)
	}
}

// A speech stream cannot be resumed: a job whose worker died while reading
// it fails clearly (and is not streamed, so paid, again), and one whose
// worker died after storing the audio succeeds with it.
func TestStreamSpeechAfterCrash(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	stored := "resume stream stored"
	broken := "resume stream broken"
	b.leaveRecord(t, "stream-broken", func(r *state.Record) {
		r.Kind, r.Status, r.Submits = "speech", state.StatusCollecting, 1
		r.Upstream = state.Upstream{RequestID: "req-1", Status: "streaming"}
	})
	key := "sluice/speech/stream-stored/result-0.mp3"
	audio := "ID3 stored audio"
	_, err := b.s3.Client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(b.s3.Bucket), Key: aws.String(key), Body: strings.NewReader(audio),
		ContentType: aws.String("audio/mpeg"), Metadata: map[string]string{"sha256": sha(strings.NewReader(audio))},
	})
	if err != nil {
		t.Fatal(err)
	}
	b.leaveRecord(t, "stream-stored", func(r *state.Record) {
		r.Kind, r.Status, r.Submits = "speech", state.StatusCollecting, 1
		r.Upstream = state.Upstream{RequestID: "req-2", Status: string(apiclient.TaskSucceeded)}
		r.Artifacts = []state.Artifact{{
			URL: "s3://" + b.s3.Bucket + "/" + key, Bucket: b.s3.Bucket, Key: key, Size: int64(len(audio)),
			SHA256: sha(strings.NewReader(audio)), ContentType: "audio/mpeg", Source: "sse",
		}}
	})
	b.start(t)
	b.publish(t, "speech", "stream-broken", speechSpec("stream-broken", broken, "stream"))
	b.publish(t, "speech", "stream-stored", speechSpec("stream-stored", stored, "stream"))

	ev := b.await(t, "stream-broken", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeUpstreamFailed ||
		ev.Data.Error.Stage != state.StageCollect || !strings.Contains(ev.Data.Error.Message, "cannot be resumed") {
		t.Errorf("broken stream: %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	ev = b.await(t, "stream-stored", 30*time.Second)
	if ev.Data.Status != "succeeded" || len(ev.Data.Artifacts) != 1 || ev.Data.Artifacts[0].Key != key {
		t.Errorf("stored stream: %+v (error %+v)", ev.Data, ev.Data.Error)
	} else {
		b.objectSHA(t, ev.Data.Artifacts[0])
	}
	if n, m := b.media.SubmitCount(broken), b.media.SubmitCount(stored); n != 0 || m != 0 {
		t.Errorf("streams opened again: %d and %d", n, m)
	}
}

// A speech stream is paid and goes straight into S3, so it is not opened
// while S3 does not answer: the job waits for S3 instead of failing with a
// wasted stream.
func TestStreamSpeechWaitsForS3(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	addr := strings.TrimPrefix(b.s3.Endpoint, "http://")
	dir := b.s3.Server.Dir()
	if err := b.s3.Server.Close(); err != nil {
		t.Fatal(err)
	}
	text := "stream while s3 is down [sim:size=20000]"
	b.publish(t, "speech", "stream-s3", speechSpec("stream-s3", text, "stream"))
	// The first delivery notes why it waits; while the store is away the
	// worker takes no job, so the next delivery comes only once it is back.
	rec := b.awaitRecord(t, "stream-s3", 30*time.Second, func(r *state.Record) bool { return r.LastError != nil })
	if n := b.media.SubmitCount(text); n != 0 || rec.Submits != 0 {
		t.Fatalf("stream opened while S3 was down: %d submits upstream, record %+v", n, rec)
	}
	srv, err := s3dev.Start(context.Background(), s3dev.Config{Dir: dir, Addr: addr, Buckets: []string{b.s3.Bucket}})
	if err != nil {
		t.Fatalf("restart s3 on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ev := b.await(t, "stream-s3", 60*time.Second)
	if ev.Data.Status != "succeeded" || len(ev.Data.Artifacts) != 1 {
		t.Fatalf("event %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	b.objectSHA(t, ev.Data.Artifacts[0])
	if n := b.media.SubmitCount(text); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
}

// Two deliveries of one job at once, here the same job id published twice
// outside the duplicate window (a worker that runs on after its lease
// lapsed while NATS was out of reach makes the same pair), send one paid
// submit between them: the second to reach the submit finds the record
// taken over and leaves the job to the other.
func TestConcurrentDeliveriesSubmitOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// Both deliveries are still uploading the inputs when the first one
	// reaches the submit.
	b.compute.Faults().Set(apisim.EndpointComputeUpload, apisim.Fault{Latency: time.Second})
	b.start(t)
	spec := computeSpec(t, b, "twice-1", "#!/bin/sh\necho twice\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n")
	b.publish(t, "compute", "", spec)
	b.publish(t, "compute", "", spec)
	ev := b.await(t, "twice-1", 60*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("event %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	// Both messages settle (the second republishes the same terminal
	// event) and the job still has one terminal event.
	b.awaitSettled(t)
	b.await(t, "twice-1", time.Second)
	if n := b.compute.SubmitCount("twice-1"); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	if rec := b.record(t, "twice-1"); rec.Submits != 1 || rec.Attempts < 2 {
		t.Errorf("record submits %d attempts %d, want 1 and at least 2", rec.Submits, rec.Attempts)
	}
}

// awaitSettled waits up to a minute for every job message to settle.
func (b *bundle) awaitSettled(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for b.pendingJobs(t) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := b.pendingJobs(t); n != 0 {
		t.Errorf("%d job messages never settled", n)
	}
}

// pendingJobs is the number of messages left in SLUICE_JOBS.
func (b *bundle) pendingJobs(t *testing.T) uint64 {
	t.Helper()
	return testenv.StoredMsgs(t, b.nats.JS, contract.JobsStream)
}

// Two deliveries inside one submit window (the second claims its submit
// while the first still waits for its submit's answer, as when that
// answer takes longer than two leases: the second leaves the job to the
// first until then) both send a submit; only the task recorded first is
// polled, copied and named by the terminal event: the other delivery
// copies nothing, so the stored artifact is always the event's.
func TestConcurrentSubmitsCopyOnlyTheRecordedTask(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// The first submit only (Times 1: clearing the fault once the record
	// says "submitting" could come before that submit's request arrives)
	// takes longer than two leases (SLUICE_ACK_WAIT 5s): the second
	// delivery submits, at once, while the first still waits.
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Latency: 20 * time.Second, Times: 1})
	b.start(t)
	const id = "twice-video"
	spec := videoSpec(id, "twice video")
	b.publishAgainWhileSubmitting(t, "video", id, spec)

	ev := b.await(t, id, 60*time.Second)
	if ev.Data.Status != "succeeded" || len(ev.Data.Artifacts) != 1 {
		t.Fatalf("event %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	b.awaitSettled(t)
	b.objectSHA(t, ev.Data.Artifacts[0])
	if n := b.media.SubmitCount("twice video"); n != 2 {
		t.Logf("paid submits = %d (2 expected: the second delivery submitted while the first still waited)", n)
	}
	if n := b.media.Counters().Requests(apisim.EndpointResult); n != 1 {
		t.Errorf("result downloads = %d, want 1: only the recorded task's result is copied", n)
	}
	// Nobody cancelled the job: the first delivery must not take the
	// second's registration on this worker for a cancel.
	if n := b.media.Counters().Requests(apisim.EndpointCancel); n != 0 {
		t.Errorf("cancel requests = %d, want 0", n)
	}
	if rec := b.record(t, id); rec.Upstream.TaskID != ev.Data.Upstream.TaskID {
		t.Errorf("record names task %s, the event %s", rec.Upstream.TaskID, ev.Data.Upstream.TaskID)
	}
}

// TestConcurrentStreamsStoreOnlyTheRecordedAudio: while a streamed
// speech job's delivery waits for its stream to open, another delivery
// claims a submit of its own (the test writes that claim into the record,
// as a worker would). A stream cannot be resumed, and both would write
// result-0: the cluster fault suite saw the later upload replace the audio
// the terminal event describes. Only the delivery of the last claim may
// record, read and store a stream: the first closes its own unread.
func TestConcurrentStreamsStoreOnlyTheRecordedAudio(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.media.Faults().Set(apisim.EndpointSpeechSubmit, apisim.Fault{Latency: 2 * time.Second})
	b.start(t)
	const id = "twice-stream"
	b.publish(t, "speech", "", speechSpec(id, "twice stream", "stream"))
	b.awaitRecord(t, id, 30*time.Second, func(r *state.Record) bool { return r.Status == state.StatusSubmitting })
	b.media.Faults().Set(apisim.EndpointSpeechSubmit, apisim.Fault{})
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := state.NewStore(b.kv(t), "other-worker", nil).Update(ctx, id, func(r *state.Record) error {
		r.Attempts++
		r.Submits++
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	ev := b.await(t, id, 60*time.Second)
	if ev.Data.Status != "succeeded" || len(ev.Data.Artifacts) != 1 {
		t.Fatalf("event %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	b.awaitSettled(t)
	b.objectSHA(t, ev.Data.Artifacts[0])
	rec := b.record(t, id)
	if rec.Upstream.RequestID != ev.Data.Upstream.RequestID || rec.Artifacts[0].SHA256 != ev.Data.Artifacts[0].SHA256 {
		t.Errorf("record names stream %s (sha %s), the event %s (sha %s)", rec.Upstream.RequestID, rec.Artifacts[0].SHA256,
			ev.Data.Upstream.RequestID, ev.Data.Artifacts[0].SHA256)
	}
	logs := b.logs.String()
	if n := strings.Count(logs, runner.LogStreamSuperseded); n != 1 {
		t.Errorf("%q logged %d times, want once: the first stream opened after the other claim", runner.LogStreamSuperseded, n)
	}
	// The first delivery's retry found the other claim fresh and left the
	// job to it for a lease, then (no delivery came back) streamed again.
	if !strings.Contains(logs, runner.LogLeftInSubmit) || rec.Submits != 3 || b.media.SubmitCount("twice stream") != 2 {
		t.Errorf("left in submit logged %v; record's submits %d (want 3: two claims of this worker's, one other); paid streams %d (want 2)",
			strings.Contains(logs, runner.LogLeftInSubmit), rec.Submits, b.media.SubmitCount("twice stream"))
	}
}

// TestRedeliveryLeavesAJobInsideItsSubmit publishes a job a second time
// while its first delivery waits for its submit's answer: the second
// finds the record at "submitting", written moments ago, and leaves the
// job to the first for a lease instead of paying for a second task.
func TestRedeliveryLeavesAJobInsideItsSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Latency: 2 * time.Second})
	b.start(t)
	const id = "inside-submit"
	spec := videoSpec(id, "inside submit")
	b.publishAgainWhileSubmitting(t, "video", id, spec)
	ev := b.await(t, id, 60*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("event %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	b.awaitSettled(t)
	b.objectSHA(t, ev.Data.Artifacts[0])
	if n := b.media.SubmitCount("inside submit"); n != 1 {
		t.Errorf("paid submits = %d, want 1", n)
	}
	// The second delivery leaves the job to the first either by its
	// verdict (it read the record at "submitting") or, when it started
	// before that record reached it on a loaded machine, by the claim's
	// fence refusing its own submit: both send nothing and come back later.
	logs := b.logs.String()
	left := strings.Contains(logs, runner.LogLeftInSubmit) || strings.Contains(logs, "checkpoint submitting: another delivery of the job took it over meanwhile")
	if rec := b.record(t, id); rec.Submits != 1 || !left {
		t.Errorf("record's submits %d, want 1; the second delivery left the job to the first: %v", rec.Submits, left)
	}
}

// publishAgainWhileSubmitting publishes spec (job id, of kind), waits until
// its first delivery is inside its submit (record at "submitting"), and
// publishes the same job again: a second delivery while the first waits
// for its submit's answer.
func (b *bundle) publishAgainWhileSubmitting(t *testing.T, kind, id string, spec any) {
	t.Helper()
	b.publish(t, kind, "", spec)
	b.awaitRecord(t, id, 30*time.Second, func(r *state.Record) bool { return r.Status == state.StatusSubmitting })
	b.publish(t, kind, "", spec)
}

// Two deliveries of one job on one worker that wait for the same task (the
// job published again while its task runs) are both told when it ends:
// they share the task's polls. Before, the second's watch replaced the
// first's, which then waited until SLUICE_TASK_TIMEOUT and sent upstream
// a cancel for a task that had long succeeded.
func TestTwoDeliveriesWaitingForOneTaskBothEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	const id = "waiting-twice"
	spec := videoSpec(id, "waiting twice [sim:duration=10s]")
	b.publish(t, "video", "", spec)
	b.awaitRecord(t, id, 30*time.Second, func(r *state.Record) bool {
		return r.Status == state.StatusSubmitted || r.Status == state.StatusRunning
	})
	b.publish(t, "video", "", spec)
	rec := b.awaitRecord(t, id, 30*time.Second, func(r *state.Record) bool { return r.Attempts >= 2 || r.Status.Terminal() })
	if rec.Status.Terminal() {
		t.Fatalf("the task ended (%s) before the second delivery read the record", rec.Status)
	}

	if ev := b.await(t, id, 60*time.Second); ev.Data.Status != "succeeded" {
		t.Fatalf("event %+v (error %+v)", ev.Data, ev.Data.Error)
	}
	b.awaitSettled(t)
	if n := b.media.Counters().Requests(apisim.EndpointCancel); n != 0 {
		t.Errorf("cancel requests = %d, want 0: a delivery was never told that its task ended", n)
	}
	if n := b.media.SubmitCount("waiting twice [sim:duration=10s]"); n != 1 {
		t.Errorf("paid submits = %d, want 1", n)
	}
	if n := logLines(b, "job failed", `"job_id":"`+id+`"`); n != 0 {
		t.Errorf("a delivery logged the job failed %d times", n)
	}
	t.Logf("result downloads: %d", b.media.Counters().Requests(apisim.EndpointResult))
}
