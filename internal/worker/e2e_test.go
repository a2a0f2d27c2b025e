package worker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

func videoSpec(id, prompt string) map[string]any {
	return map[string]any{
		"id": id, "kind": "video", "labels": map[string]string{"suite": "e2e"},
		"video": map[string]any{
			"model":      "video-model",
			"input":      map[string]any{"prompt": prompt},
			"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
		},
	}
}

func speechSpec(id, text, mode string) map[string]any {
	return map[string]any{
		"id": id, "kind": "speech",
		"speech": map[string]any{"model": "speech-model", "mode": mode, "input": map[string]any{"text": text, "voice": "alloy"}},
	}
}

// objectSHA reads an object back from S3 and checks its stored metadata.
func (b *bundle) objectSHA(t *testing.T, a state.Artifact) string {
	t.Helper()
	out, err := b.s3.Client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(a.Key)})
	if err != nil {
		t.Fatalf("get %s: %v", a.Key, err)
	}
	defer out.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, out.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if n != a.Size || sum != a.SHA256 {
		t.Errorf("object %s: size %d sha %s, event says %d %s", a.Key, n, sum, a.Size, a.SHA256)
	}
	if out.Metadata["sha256"] != sum {
		t.Errorf("object %s: metadata sha256 %q, want %q", a.Key, out.Metadata["sha256"], sum)
	}
	if aws.ToString(out.ContentType) != a.ContentType {
		t.Errorf("object %s: Content-Type %q, event says %q", a.Key, aws.ToString(out.ContentType), a.ContentType)
	}
	return sum
}

func sha(r io.Reader) string {
	h := sha256.New()
	_, _ = io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil))
}

func TestVideoEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	spec := videoSpec("clip-1", "a paper boat [sim:count=2] [sim:show-running]")
	spec["output"] = map[string]string{"prefix": "spring/clips"}
	b.publish(t, "video", "clip-1", spec)
	ev := b.await(t, "clip-1", 30*time.Second)

	if ev.Data.Status != "succeeded" || ev.ID != "clip-1.succeeded" || ev.Type != "sluice.job.succeeded" || ev.Source != "sluice/worker" {
		t.Fatalf("terminal event = %+v", ev)
	}
	if ev.Data.Labels["suite"] != "e2e" || ev.Data.Upstream == nil || ev.Data.Upstream.TaskID == "" || ev.Data.Upstream.RequestID == "" {
		t.Errorf("event data = %+v", ev.Data)
	}
	if !bytes.Contains(ev.Data.Usage, []byte("video_count")) {
		t.Errorf("usage not passed through: %s", ev.Data.Usage)
	}
	if len(ev.Data.Artifacts) != 2 {
		t.Fatalf("artifacts = %+v", ev.Data.Artifacts)
	}
	for i, a := range ev.Data.Artifacts {
		want := fmt.Sprintf("sluice/spring/clips/video/clip-1/result-%d.mp4", i)
		if a.Key != want || a.URL != "s3://"+b.s3.Bucket+"/"+want || a.ContentType != "video/mp4" {
			t.Errorf("artifact %d = %+v, want key %s", i, a, want)
		}
		got := b.objectSHA(t, a)
		if exp := sha(apisim.ResultBytes(ev.Data.Upstream.TaskID, i, a.Size)); got != exp {
			t.Errorf("artifact %d sha %s, simulator generated %s", i, got, exp)
		}
	}
	var statuses []string
	for _, e := range b.events(t) {
		if e.Subject == "clip-1" {
			statuses = append(statuses, e.Data.Status)
		}
	}
	if strings.Join(statuses, ",") != "submitted,running,succeeded" {
		t.Errorf("events = %v, want submitted,running,succeeded", statuses)
	}
	if n := b.media.SubmitCount("a paper boat [sim:count=2] [sim:show-running]"); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	if rec := b.record(t, "clip-1"); rec.Status != state.StatusSucceeded || rec.Submits != 1 {
		t.Errorf("record = %+v", rec)
	}
}

func TestImageToVideoPresignsS3Inputs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	_, err := b.s3.Client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(b.s3.Bucket), Key: aws.String("inputs/boat.png"), Body: bytes.NewReader(testmedia.Fixture(t, "image-384x256.png")),
	})
	if err != nil {
		t.Fatal(err)
	}
	files := testmedia.Serve(t)
	b.start(t)
	spec := videoSpec("i2v-1", "a boat from a frame")
	spec["video"].(map[string]any)["input"] = map[string]any{
		"prompt": "a boat from a frame",
		"media": []map[string]string{
			{"type": "first_frame", "url": "s3://" + b.s3.Bucket + "/inputs/boat.png"},
			{"type": "last_frame", "url": files.URL + "/media/image-384x256.webp"},
		},
	}
	b.publish(t, "video", "i2v-1", spec)
	ev := b.await(t, "i2v-1", 30*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s: %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("a boat from a frame"); n != 1 {
		t.Errorf("submits = %d", n)
	}
}

func TestSpeechModes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	for _, mode := range []string{"sync", "async", "stream"} {
		id := "speech-" + mode
		b.publish(t, "speech", id, speechSpec(id, "hello from "+mode+" [sim:size=50000]", mode))
	}
	for _, mode := range []string{"sync", "async", "stream"} {
		id := "speech-" + mode
		ev := b.await(t, id, 30*time.Second)
		if ev.Data.Status != "succeeded" || len(ev.Data.Artifacts) != 1 {
			t.Fatalf("%s: %+v (error %+v)", mode, ev.Data, ev.Data.Error)
		}
		a := ev.Data.Artifacts[0]
		if !strings.HasPrefix(a.Key, "sluice/speech/"+id+"/result-0.") || !strings.HasPrefix(a.ContentType, "audio/") {
			t.Errorf("%s artifact = %+v", mode, a)
		}
		b.objectSHA(t, a)
		if mode != "stream" && a.Size != 50000 {
			t.Errorf("%s: size %d", mode, a.Size)
		}
		if len(ev.Data.Usage) == 0 || string(ev.Data.Usage) == "null" {
			t.Errorf("%s: no usage", mode)
		}
		if n := b.media.SubmitCount("hello from " + mode + " [sim:size=50000]"); n != 1 {
			t.Errorf("%s: submits = %d", mode, n)
		}
	}
}

func computeSpec(t *testing.T, b *bundle, id, script string) map[string]any {
	t.Helper()
	_, err := b.s3.Client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(b.s3.Bucket), Key: aws.String("scripts/" + id + ".sh"), Body: strings.NewReader(script),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.s3.Client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(b.s3.Bucket), Key: aws.String("inputs/params.nml"), Body: strings.NewReader("alpha=1\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := "/public/home/alice/" + id
	return map[string]any{
		"id": id, "kind": "compute",
		"compute": map[string]any{
			"template": map[string]string{"type": "BASIC", "name": "BASE"},
			"job": map[string]any{
				"name": id, "queue": "normal", "nodes": 1, "ppn": 4, "wall_time": "00:10:00",
				"work_dir": dir, "script": dir + "/" + id + ".sh",
			},
			"inputs": []map[string]any{
				{"from": "s3://" + b.s3.Bucket + "/scripts/" + id + ".sh", "to": dir, "cover": true},
				{"from": "s3://" + b.s3.Bucket + "/inputs/params.nml", "to": dir},
			},
			"outputs": []string{dir + "/result.dat", dir + "/params-copy.nml"},
		},
	}
}

func TestComputeEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	script := "#!/bin/sh\necho simulating\n#SIM output result.dat 300K\ncp params.nml params-copy.nml\n"
	b.publish(t, "compute", "hpc-1", computeSpec(t, b, "hpc-1", script))
	ev := b.await(t, "hpc-1", 30*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("status %s error %+v", ev.Data.Status, ev.Data.Error)
	}
	u := ev.Data.Upstream
	if u == nil || u.ClusterID == "" || u.JobID == "" || u.ExitCode == nil || *u.ExitCode != "0" || u.Status == "" {
		t.Errorf("upstream = %+v", u)
	}
	names := map[string]state.Artifact{}
	for _, a := range ev.Data.Artifacts {
		names[a.Key[strings.LastIndex(a.Key, "/")+1:]] = a
		b.objectSHA(t, a)
	}
	for _, n := range []string{"stdout.txt", "stderr.txt", "result.dat", "params-copy.nml"} {
		if _, ok := names[n]; !ok {
			t.Errorf("artifact %s missing: %+v", n, ev.Data.Artifacts)
		}
	}
	if a := names["result.dat"]; a.Size != 300<<10 || a.SHA256 != sha(apisim.ComputeOutputBytes("/public/home/alice/hpc-1/result.dat", 300<<10)) {
		t.Errorf("result.dat = %+v", a)
	}
	if a := names["params-copy.nml"]; a.Size != int64(len("alpha=1\n")) {
		t.Errorf("params-copy.nml = %+v", a)
	}
	if n := b.compute.SubmitCount("hpc-1"); n != 1 {
		t.Errorf("submits = %d", n)
	}
}

func TestComputeNonZeroExit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	b.publish(t, "compute", "hpc-exit", computeSpec(t, b, "hpc-exit", "#!/bin/sh\necho before\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\nexit 3\n"))
	ev := b.await(t, "hpc-exit", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeExitStatus || ev.Data.Error.Stage != "poll" {
		t.Fatalf("event = %+v error %+v", ev.Data, ev.Data.Error)
	}
	if len(ev.Data.Artifacts) < 2 {
		t.Errorf("stdout/stderr not collected for a failed job: %+v", ev.Data.Artifacts)
	}
	if len(b.deadLetters(t)) != 0 {
		t.Error("an upstream job failure must not be dead-lettered")
	}
}

func TestInvalidSpecsFailAndDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	bad := videoSpec("bad-1", "too short")
	bad["video"].(map[string]any)["parameters"] = map[string]any{"resolution": "4K", "duration": 5.5, "ratio": "16:9"}
	b.publish(t, "video", "bad-1", bad)
	b.publish(t, "speech", "", "this is not json")
	b.publish(t, "video", "", `{"kind":"speech","id":"wrong-kind","speech":{"model":"m","input":{"text":"t","voice":"v"}}}`)

	ev := b.await(t, "bad-1", 20*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error.Code != "invalid_spec" || ev.Data.Error.Stage != "validate" {
		t.Fatalf("bad-1: %+v", ev.Data.Error)
	}
	if !strings.Contains(ev.Data.Error.Message, "video.parameters.resolution") || !strings.Contains(ev.Data.Error.Message, "video.parameters.duration") {
		t.Errorf("message does not name both fields: %s", ev.Data.Error.Message)
	}
	if ev.Data.Labels["suite"] != "e2e" {
		t.Errorf("labels of an invalid spec not echoed: %v", ev.Data.Labels)
	}
	wrong := b.await(t, "wrong-kind", 20*time.Second)
	if wrong.Data.Error == nil || !strings.Contains(wrong.Data.Error.Message, "kind") {
		t.Errorf("kind mismatch: %+v", wrong.Data.Error)
	}
	var notJSON events.Event
	deadline := time.Now().Add(20 * time.Second)
	for notJSON.ID == "" && time.Now().Before(deadline) {
		for _, e := range b.events(t) {
			if strings.HasPrefix(e.Subject, "js-") && e.Data.Kind == "speech" {
				notJSON = e
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if notJSON.Data.Status != "failed" || notJSON.Data.Error.Code != "invalid_spec" {
		t.Fatalf("not-JSON message: %+v", notJSON)
	}

	deadline = time.Now().Add(10 * time.Second)
	var dl []string
	for len(dl) < 3 && time.Now().Before(deadline) {
		dl = dl[:0]
		for _, m := range b.deadLetters(t) {
			if m.Header.Get(contract.HeaderError) == "" {
				t.Errorf("dead letter without %s", contract.HeaderError)
			}
			dl = append(dl, m.Subject+"|"+m.Header.Get(contract.HeaderJobID)+"|"+string(m.Data))
		}
		time.Sleep(50 * time.Millisecond)
	}
	joined := strings.Join(dl, "\n")
	for _, want := range []string{"sluice.dlq.video|bad-1|", "sluice.dlq.speech|js-", "this is not json", "sluice.dlq.video|wrong-kind|"} {
		if !strings.Contains(joined, want) {
			t.Errorf("dead letters lack %q:\n%s", want, joined)
		}
	}
}

func TestUpstreamTaskFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	b.publish(t, "video", "fail-1", videoSpec("fail-1", "doomed [sim:fail=content_blocked]"))
	ev := b.await(t, "fail-1", 20*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error.Code != "content_blocked" || ev.Data.Error.Stage != "poll" {
		t.Fatalf("event = %+v", ev.Data.Error)
	}
	if len(b.deadLetters(t)) != 0 {
		t.Error("an upstream task failure must not be dead-lettered")
	}
}

func TestUpstreamStormsAreRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.media.Faults().Set(apisim.EndpointTasks, apisim.Fault{Error5xxRate: 0.4, Error429Rate: 0.2, RetryAfter: time.Second})
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error429Rate: 0.5, RetryAfter: time.Second})
	b.start(t)
	for i := range 5 {
		id := fmt.Sprintf("storm-%d", i)
		b.publish(t, "video", id, videoSpec(id, "storm "+id))
	}
	for i := range 5 {
		id := fmt.Sprintf("storm-%d", i)
		if ev := b.await(t, id, 90*time.Second); ev.Data.Status != "succeeded" {
			t.Errorf("%s: %+v", id, ev.Data.Error)
		}
		if n := b.media.SubmitCount("storm " + id); n != 1 {
			t.Errorf("%s: %d submits", id, n)
		}
	}
}

func TestAmbiguousSubmitIsNotRepeated(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error500AfterRate: 1})
	b.start(t)
	b.publish(t, "video", "amb-1", videoSpec("amb-1", "ambiguous"))
	ev := b.await(t, "amb-1", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error.Code != runner.CodeSubmitAmbiguous || ev.Data.Error.Stage != "submit" {
		t.Fatalf("event = %+v", ev.Data.Error)
	}
	if n := b.media.SubmitCount("ambiguous"); n != 1 {
		t.Errorf("submits = %d, want exactly 1", n)
	}
}

func TestArtifactTooLargeAndPrivateURL(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.MaxArtifactBytes = 10000 })
	b.publish(t, "video", "big-1", videoSpec("big-1", "huge [sim:size=20000]"))
	ev := b.await(t, "big-1", 20*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error.Code != runner.CodeArtifactTooLarge || ev.Data.Error.Stage != "collect" {
		t.Fatalf("too large: %+v", ev.Data.Error)
	}

	b2 := setup(t, setupOpts{})
	b2.start(t, func(c *config.Config) { c.AllowPrivateURLs = false })
	b2.publish(t, "video", "ssrf-1", videoSpec("ssrf-1", "metadata [sim:result-url=http://169.254.169.254/latest/meta-data]"))
	ev = b2.await(t, "ssrf-1", 20*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error.Code != runner.CodeArtifactFetchFailed {
		t.Fatalf("private url: %+v", ev.Data.Error)
	}
	if n := b2.media.SubmitCount("metadata [sim:result-url=http://169.254.169.254/latest/meta-data]"); n != 1 {
		t.Errorf("a failed copy resubmitted: %d submits", n)
	}
}

func cancel(t *testing.T, b *bundle, id string) contract.CancelReply {
	t.Helper()
	body, _ := json.Marshal(contract.CancelRequest{JobID: id})
	m, err := b.nats.Conn.Request(contract.CancelSubject, body, 5*time.Second)
	if err != nil {
		t.Fatalf("cancel %s: %v", id, err)
	}
	var r contract.CancelReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 30 * time.Second})
	b.start(t, func(c *config.Config) { c.Kinds = []string{"speech", "compute"} })

	// Queued: no worker serves video yet.
	b.publish(t, "video", "queued-1", videoSpec("queued-1", "never submitted"))
	if r := cancel(t, b, "queued-1"); r.Cancel != "requested" {
		t.Fatalf("cancel reply = %+v", r)
	}
	b.start(t)
	ev := b.await(t, "queued-1", 20*time.Second)
	if ev.Data.Status != "cancelled" || b.media.SubmitCount("never submitted") != 0 {
		t.Fatalf("queued cancel: %+v, submits %d", ev.Data, b.media.SubmitCount("never submitted"))
	}

	// Running: the upstream task is cancelled.
	b.publish(t, "video", "running-1", videoSpec("running-1", "long running"))
	b.awaitStatus(t, "running-1", state.StatusRunning, 20*time.Second)
	if r := cancel(t, b, "running-1"); r.Error != "" {
		t.Fatalf("cancel reply = %+v", r)
	}
	ev = b.await(t, "running-1", 20*time.Second)
	if ev.Data.Status != "cancelled" || ev.Data.Upstream == nil || ev.Data.Upstream.Status != "cancelled" {
		t.Fatalf("running cancel: %+v", ev.Data)
	}
	if got := b.media.Counters().Get("requests:" + apisim.EndpointCancel + ":200"); got != 1 {
		t.Errorf("upstream cancels = %d (%v)", got, b.media.Counters().Snapshot())
	}
	if r := cancel(t, b, "running-1"); r.Cancel != "terminal" {
		t.Errorf("cancel of a finished job = %+v", r)
	}
}

// A worker that stops gracefully hands its waiting jobs over: the next
// worker polls their tasks and completes them without submitting again.
// The tasks end only when the test moves the simulator's clock on, after
// the handover, so no task ends on the first worker however slow the
// machine.
func TestGracefulShutdownHandsJobsOver(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: time.Hour})
	stopA := b.start(t, func(c *config.Config) { c.TaskTimeout = 2 * time.Hour })
	for i := range 4 {
		id := fmt.Sprintf("handover-%d", i)
		b.publish(t, "video", id, videoSpec(id, "handover "+id))
	}
	for i := range 4 {
		b.awaitStatus(t, fmt.Sprintf("handover-%d", i), state.StatusSubmitted, 3*time.Minute)
	}
	stopA()
	b.start(t, func(c *config.Config) { c.TaskTimeout = 2 * time.Hour })
	b.advanceMedia(time.Hour)
	for i := range 4 {
		id := fmt.Sprintf("handover-%d", i)
		ev := b.await(t, id, 3*time.Minute)
		if ev.Data.Status != "succeeded" {
			t.Errorf("%s: %+v", id, ev.Data.Error)
		}
		if n := b.media.SubmitCount("handover " + id); n != 1 {
			t.Errorf("%s: %d submits", id, n)
		}
		if rec := b.record(t, id); rec.Attempts < 2 {
			t.Errorf("%s: attempts %d, want a second delivery", id, rec.Attempts)
		}
	}
}

// coreEvents counts what a core subscriber on sluice.events.> receives,
// per event id.
type coreEvents struct {
	nc  *nats.Conn
	mu  sync.Mutex
	ids map[string]int
}

func subscribeEvents(t *testing.T, b *bundle) *coreEvents {
	t.Helper()
	c := &coreEvents{ids: map[string]int{}}
	nc, err := nats.Connect(b.nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c.nc = nc
	if _, err := nc.Subscribe("sluice.events.>", func(m *nats.Msg) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.ids[m.Header.Get(contract.HeaderMsgID)]++
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

// count returns how often id arrived, after a round trip to the server:
// every event the server routed before it has been delivered.
func (c *coreEvents) count(t *testing.T, id string) int {
	t.Helper()
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[id]
}

// settled waits until every message in SLUICE_JOBS is settled: the worker
// publishes a job's terminal event before it acknowledges the message.
func (b *bundle) settled(t *testing.T, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for b.pendingJobs(t) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d job messages not settled within %s", b.pendingJobs(t), within)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// A finished job's spec published again (a new Nats-Msg-Id, the same job
// id) neither runs the job again nor publishes its terminal event again: the
// record names the message that ended the job, whose ack the server
// confirmed, and a core subscriber sees the event once.
func TestRepublishedFinishedJobPublishesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	core := subscribeEvents(t, b)
	b.start(t)
	b.publish(t, "video", "again-1", videoSpec("again-1", "once"))
	first := b.await(t, "again-1", 20*time.Second)
	b.settled(t, 10*time.Second)
	if rec := b.record(t, "again-1"); rec.TerminalSeq != 1 || rec.TerminalEventStored {
		t.Fatalf("record does not name message 1 as the one that ended the job (its ack confirmed, no note): %+v", rec)
	}
	b.publish(t, "video", "again-1-second", videoSpec("again-1", "once"))
	b.publish(t, "video", "", videoSpec("again-1", "once"))
	b.settled(t, 10*time.Second)
	ev := b.await(t, "again-1", time.Second)
	if ev.Time != first.Time || b.media.SubmitCount("once") != 1 {
		t.Errorf("finished job ran again: first %s now %s, submits %d", first.Time, ev.Time, b.media.SubmitCount("once"))
	}
	for _, id := range []string{"again-1.submitted", "again-1.running", "again-1.succeeded"} {
		if n := core.count(t, id); n != 1 {
			t.Errorf("core subscriber received %s %d times, want once", id, n)
		}
	}
}

// A worker that wrote a job's terminal record but stopped before the
// stream acknowledged its event has not published it: the next delivery
// publishes it, once, and records that the stream holds it.
func TestTerminalEventLostBeforeRecordIsPublishedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	core := subscribeEvents(t, b)
	ctx := testenv.Context(t, 10*time.Second)
	if err := contract.Ensure(ctx, b.nats.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	b.crashedAfterTerminalRecord(t, "lost-1", 0)
	b.start(t)
	b.publish(t, "video", "lost-1", videoSpec("lost-1", "never sent"))
	ev := b.await(t, "lost-1", 20*time.Second)
	b.settled(t, 10*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "upstream_failed" {
		t.Fatalf("event %+v, want the recorded failure", ev.Data)
	}
	if rec := b.record(t, "lost-1"); !rec.TerminalEventStored {
		t.Errorf("record does not show the event stored: %+v", rec)
	}
	b.publish(t, "video", "lost-1-again", videoSpec("lost-1", "never sent"))
	b.settled(t, 10*time.Second)
	if n := core.count(t, "lost-1.failed"); n != 1 {
		t.Errorf("core subscriber received the terminal event %d times, want once", n)
	}
	if n := b.media.SubmitCount("never sent"); n != 0 {
		t.Errorf("a finished job was submitted %d times", n)
	}
}

// crashedAfterTerminalRecord writes what a worker that stopped right after
// ending video job id failed leaves: its terminal record with the event to
// publish, naming message seq as the one that ended it (0: a record of an
// older worker, which names none), and no note that the stream holds the
// event.
func (b *bundle) crashedAfterTerminalRecord(t *testing.T, id string, seq uint64) {
	t.Helper()
	now := time.Now().UTC()
	if _, err := state.NewStore(b.kv(t), "crashed-worker", nil).Update(testenv.Context(t, 10*time.Second), id, func(r *state.Record) error {
		r.Kind, r.Status, r.Attempts, r.FinishedAt, r.TerminalSeq = "video", state.StatusFailed, 1, &now, seq
		r.Error = &state.Error{Code: "upstream_failed", Message: "the task failed", Stage: state.StagePoll}
		ev, err := json.Marshal(events.FromRecord(r, r.Status, now))
		r.TerminalEvent = ev
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// A worker that wrote a job's terminal record, naming its message, but
// stopped before publishing the event leaves it to that message: delivered
// again, it publishes the event once and its confirmed ack needs no note.
// A copy of the spec under another sequence publishes nothing, even when
// it comes first.
func TestTerminalEventIsPublishedByTheMessageThatEndedTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	core := subscribeEvents(t, b)
	ctx := testenv.Context(t, 20*time.Second)
	if err := contract.Ensure(ctx, b.nats.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	copySeq := b.publish(t, "video", "ended-1-copy", videoSpec("ended-1", "never sent"))
	ownSeq := b.publish(t, "video", "ended-1", videoSpec("ended-1", "never sent"))
	b.crashedAfterTerminalRecord(t, "ended-1", ownSeq)
	b.start(t)
	b.settled(t, 20*time.Second)
	if n := core.count(t, "ended-1.failed"); n != 1 {
		t.Errorf("core subscriber received the terminal event %d times, want once (copy %d, own %d)", n, copySeq, ownSeq)
	}
	if rec := b.record(t, "ended-1"); rec.TerminalSeq != ownSeq || rec.TerminalEventStored || rec.Attempts != 1 {
		t.Errorf("record %+v: want terminal_seq %d, no note, attempts unchanged", rec, ownSeq)
	}
	if n := b.media.SubmitCount("never sent"); n != 0 {
		t.Errorf("a finished job was submitted %d times", n)
	}
}
