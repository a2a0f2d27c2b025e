package worker_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

// mediaJob is a video spec with the given media items (role, url).
func mediaJob(id string, items ...[2]string) map[string]any {
	spec := videoSpec(id, "preflight "+id)
	var media []map[string]string
	for _, it := range items {
		media = append(media, map[string]string{"type": it[0], "url": it[1]})
	}
	spec["video"].(map[string]any)["input"] = map[string]any{"prompt": "preflight " + id, "media": media}
	return spec
}

func (b *bundle) putInput(t *testing.T, key string, body []byte) string {
	t.Helper()
	_, err := b.s3.Client.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(b.s3.Bucket), Key: aws.String(key), Body: bytes.NewReader(body),
	})
	if err != nil {
		t.Fatal(err)
	}
	return "s3://" + b.s3.Bucket + "/" + key
}

func dataURI(mime string, b []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// TestPreflight: a job whose input breaks a limit, or cannot be fetched,
// fails at validate and is dead-lettered without a single submit request
// reaching the simulator; good inputs of every kind and address form go
// through. With SLUICE_PREFLIGHT=off the same bad input reaches upstream,
// which refuses it at submit.
func TestPreflight(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	in := servePreflightInputs(t, b)
	b.start(t)
	bad, good := in.badJobs(b), in.goodJobs(t, b)
	for _, j := range slices.Concat(bad, good) {
		b.publish(t, "video", j.id, mediaJob(j.id, j.items...))
	}
	for _, j := range bad {
		ev := b.await(t, j.id, 30*time.Second)
		if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != j.code || ev.Data.Error.Stage != "validate" ||
			!strings.HasPrefix(ev.Data.Error.Message, j.msg) {
			t.Errorf("%s: %s %+v, want failed %s at validate: %q", j.id, ev.Data.Status, ev.Data.Error, j.code, j.msg)
		}
		if strings.Contains(ev.Data.Error.Message, "SECRET") {
			t.Errorf("%s: the message carries the URL's query: %s", j.id, ev.Data.Error.Message)
		}
	}
	for _, j := range good {
		ev := b.await(t, j.id, 30*time.Second)
		if ev.Data.Status != "succeeded" {
			t.Errorf("%s: %s %+v, want succeeded", j.id, ev.Data.Status, ev.Data.Error)
		}
		if rec := b.record(t, j.id); rec.PreflightAt == nil {
			t.Errorf("%s: the record does not say it passed preflight", j.id)
		}
	}
	// Only the good jobs were submitted: the bad ones never reached the
	// simulator's submit endpoint at all.
	if n := b.media.Counters().Requests(apisim.EndpointVideoSubmit); n != int64(len(good)) {
		t.Errorf("video submit requests = %d, want %d (the good jobs only)", n, len(good))
	}
	b.expectDeadLettered(t, bad)
}

// preflightJob is a video job of TestPreflight: its media items, and for
// a bad one the error it fails with.
type preflightJob struct {
	id, code, msg string
	items         [][2]string
}

// preflightInputs are TestPreflight's media: files served over HTTP and
// objects in the S3 store.
type preflightInputs struct {
	files      *testmedia.Server
	fix        func(name string) []byte
	small, png string
}

func servePreflightInputs(t *testing.T, b *bundle) *preflightInputs {
	t.Helper()
	in := &preflightInputs{files: testmedia.Serve(t), fix: func(name string) []byte { return testmedia.Fixture(t, name) }}
	in.small = b.putInput(t, "inputs/small.jpg", in.fix("image-200x180.jpg"))
	in.png = b.putInput(t, "inputs/frame.png", in.fix("image-384x256.png"))
	truncated := in.fix("video-moov-at-end.mp4")
	in.files.Add("truncated.mp4", func() io.ReadSeeker { return bytes.NewReader(truncated[:len(truncated)-500]) })
	return in
}

func (in *preflightInputs) url(name string) string { return in.files.URL + "/media/" + name }

// badJobs are the jobs preflight fails, each with its error.
func (in *preflightInputs) badJobs(b *bundle) []preflightJob {
	url, fix, small, png, files := in.url, in.fix, in.small, in.png, in.files
	return []preflightJob{
		{"pf-small", "invalid_media", "video.input.media[0].url: image is 200x180 px, want width and height in [256, 5760]",
			[][2]string{{"first_frame", small}}},
		{"pf-gif", "invalid_media", "video.input.media[1].url: content is GIF, want image",
			[][2]string{{"first_frame", png}, {"last_frame", url("image-disguised.png")}}},
		{"pf-fps", "invalid_media", "video.input.media[0].url: video frame rate is 23.900 fps, want [23.976, 60]",
			[][2]string{{"reference_video", url("video-23.9fps.mp4")}}},
		{"pf-long", "invalid_media", "video.input.media[0].url: video is 15.1 s long, want each clip in [2, 15] s",
			[][2]string{{"reference_video", url("video-h264-15.1s.mp4")}}},
		{"pf-total", "invalid_media", "video.input.media: the 2 video clips total 15.1 s, want at most 15 s",
			[][2]string{{"reference_video", url("video-h264-aac-2s.mp4")}, {"reference_video", url("video-h264-13.1s.mp4")}}},
		{"pf-codec", "invalid_media", `video.input.media[0].url: video codec is MPEG-4 Part 2 ("mp4v"), want H.264 or H.265`,
			[][2]string{{"reference_video", url("video-mpeg4.mp4")}}},
		{"pf-truncated", "invalid_media", "video.input.media[0].url: cannot be read as MP4: malformed media: truncated",
			[][2]string{{"reference_video", url("truncated.mp4")}}},
		{"pf-audio", "invalid_media", "video.input.media[1].url: audio is 1.9 s long",
			[][2]string{{"reference_image", png}, {"reference_audio", dataURI("audio/wav", fix("audio-1.9s.wav"))}}},
		{"pf-404", "input_unreachable", "video.input.media[0].url: cannot fetch the image after 1 try: fetch " + files.URL + "/media/missing.png: HTTP 404",
			[][2]string{{"reference_image", url("missing.png") + "?sig=SECRET-query"}}},
		{"pf-nokey", "input_unreachable", "video.input.media[0].url: cannot fetch the image after 1 try",
			[][2]string{{"reference_image", "s3://" + b.s3.Bucket + "/inputs/none.png"}}},
	}
}

// goodJobs are the jobs preflight lets through, every kind of input and
// address form among them.
func (in *preflightInputs) goodJobs(t *testing.T, b *bundle) []preflightJob {
	url, fix, png := in.url, in.fix, in.png
	return []preflightJob{
		{id: "pf-frames", items: [][2]string{{"first_frame", png}, {"last_frame", dataURI("image/webp", fix("image-384x256.webp"))}}},
		{id: "pf-refs", items: [][2]string{
			{"reference_image", url("image-384x256.jpg")}, {"reference_image", url("image-384x256.heic")},
			{"reference_image", url("image-disguised.jpg")},
			{"reference_video", url("video-moov-at-end.mp4")}, {"reference_video", url("video-h265-mp3.mov")},
			{"reference_video", b.putInput(t, "inputs/clip.mp4", fix("video-23.976fps.mp4"))},
			{"reference_audio", url("audio-2s.wav")}, {"reference_audio", url("audio-3s-cbr-no-xing.mp3")},
		}},
	}
}

// expectDeadLettered waits for every one of jobs in SLUICE_DLQ.
func (b *bundle) expectDeadLettered(t *testing.T, jobs []preflightJob) {
	t.Helper()
	dead := map[string]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(dead) < len(jobs) && time.Now().Before(deadline) {
		for _, m := range b.deadLetters(t) {
			dead[m.Header.Get(contract.HeaderJobID)] = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, j := range jobs {
		if !dead[j.id] {
			t.Errorf("%s was not dead-lettered", j.id)
		}
	}
}

// TestPreflightOff: without preflight the bad input is sent upstream,
// which refuses it at submit (a parameter error): the job fails later, at
// submit, having cost a request.
func TestPreflightOff(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	files := testmedia.Serve(t)
	b.start(t, func(c *config.Config) { c.Preflight = "off" })
	b.publish(t, "video", "pf-off", mediaJob("pf-off", [2]string{"reference_video", files.URL + "/media/video-23.9fps.mp4"}))
	ev := b.await(t, "pf-off", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Stage != "submit" || ev.Data.Error.Code != "invalid_parameter" ||
		!strings.Contains(ev.Data.Error.Message, "23.900 fps") {
		t.Errorf("pf-off: %s %+v, want failed invalid_parameter at submit", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.Counters().Requests(apisim.EndpointVideoSubmit); n != 1 {
		t.Errorf("video submit requests = %d, want 1", n)
	}
	if n := b.media.SubmitCount("preflight pf-off"); n != 0 {
		t.Errorf("paid submits = %d, want 0", n)
	}
	if rec := b.record(t, "pf-off"); rec.PreflightAt != nil {
		t.Errorf("record says preflight passed with SLUICE_PREFLIGHT=off")
	}
}

// TestPreflightNotRepeated: a job whose record says it passed preflight
// (a redelivery after a crash between preflight and submit) is submitted
// without its inputs being fetched again; one without such a record is
// probed.
func TestPreflightNotRepeated(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{simSkipInputs: true})
	files := testmedia.Serve(t)
	b.start(t)
	st := state.NewStore(b.kv(t), "", nil)
	passed := time.Now().UTC()
	if _, err := st.Update(context.Background(), "pf-again", func(r *state.Record) error {
		r.Kind, r.Status, r.Attempts, r.PreflightAt = "video", state.StatusReceived, 1, &passed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.publish(t, "video", "pf-again", mediaJob("pf-again", [2]string{"reference_video", files.URL + "/media/video-h264-aac-2s.mp4"}))
	if ev := b.await(t, "pf-again", 30*time.Second); ev.Data.Status != "succeeded" {
		t.Fatalf("pf-again: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := files.Requests(); n != 0 {
		t.Errorf("the input was fetched %d times although the record says it passed preflight", n)
	}
	b.publish(t, "video", "pf-first", mediaJob("pf-first", [2]string{"reference_video", files.URL + "/media/video-h264-aac-2s.mp4"}))
	if ev := b.await(t, "pf-first", 30*time.Second); ev.Data.Status != "succeeded" {
		t.Fatalf("pf-first: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := files.Requests(); n == 0 {
		t.Errorf("a first delivery was not probed")
	}
}

// TestSubmitAgainProbesInputsAgain: a job whose last worker died inside the
// submit window (its record at "submitting", written a minute ago, with
// its preflight passed) probes its inputs again before it submits again:
// an input gone meanwhile fails the job input_unreachable, nothing paid,
// instead of a second paid submit that upstream refuses.
func TestSubmitAgainProbesInputsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	const id = "pf-again"
	ago := func() time.Time { return time.Now().Add(-time.Minute) }
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := state.NewStore(b.kv(t), "crashed-worker", ago).Update(ctx, id, func(r *state.Record) error {
		passed := ago()
		r.Kind, r.Status, r.Attempts, r.Submits, r.PreflightAt = "video", state.StatusSubmitting, 1, 1, &passed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.publish(t, "video", id, mediaJob(id, [2]string{"reference_image", "s3://" + b.s3.Bucket + "/inputs/gone.png"}))
	ev := b.await(t, id, 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "input_unreachable" {
		t.Fatalf("event %s %+v, want failed input_unreachable", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("preflight " + id); n != 0 {
		t.Errorf("paid submits = %d, want 0", n)
	}
}
