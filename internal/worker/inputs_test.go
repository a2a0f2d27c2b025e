package worker_test

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

// failingS3 puts a proxy in front of the bundle's S3 store that answers
// 500 InternalError to every GET of a key containing match while down is
// set; everything else reaches the store.
func failingS3(t *testing.T, b *bundle, match string) (endpoint string, down *atomic.Bool) {
	t.Helper()
	down = &atomic.Bool{}
	endpoint = s3Failing(t, b, func(r *http.Request) bool {
		return down.Load() && strings.Contains(r.URL.Path, match)
	})
	return endpoint, down
}

// s3Failing puts a proxy in front of the bundle's S3 store that answers
// 500 InternalError to every GET for which fails reports true; everything
// else reaches the store.
func s3Failing(t *testing.T, b *bundle, fails func(*http.Request) bool) (endpoint string) {
	t.Helper()
	target, err := url.Parse(b.s3.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && fails(r) {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>We encountered an internal error. Please try again.</Message></Error>`))
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An S3 outage while a compute input is read delays the job (it is
// redelivered and nothing is submitted) instead of failing it; once S3 is
// back the job runs to its end.
func TestComputeInputS3OutageIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	endpoint, down := failingS3(t, b, "/inputs/")
	down.Store(true)
	b.start(t, func(c *config.Config) { c.S3Endpoint = endpoint })
	b.publish(t, "compute", "hpc-s3-down", computeSpec(t, b, "hpc-s3-down", "#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n"))

	rec := b.awaitRecord(t, "hpc-s3-down", 60*time.Second, func(r *state.Record) bool {
		return r.Attempts >= 2 || r.Status.Terminal()
	})
	if rec.Status.Terminal() {
		t.Fatalf("an S3 outage on an input ended the job: %s %+v", rec.Status, rec.Error)
	}
	if n := b.compute.SubmitCount("hpc-s3-down"); n != 0 {
		t.Fatalf("submitted %d times while an input could not be read", n)
	}
	down.Store(false)
	ev := b.await(t, "hpc-s3-down", 90*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("after S3 came back: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.compute.SubmitCount("hpc-s3-down"); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
}

// An input that cannot be read for good (a missing object) fails the job
// with input_fetch_failed at submit, dead-lettered, never submitted.
func TestComputeMissingInputFails(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	spec := computeSpec(t, b, "hpc-no-input", "#!/bin/sh\ntrue\n")
	inputs := spec["compute"].(map[string]any)["inputs"].([]map[string]any)
	inputs[1]["from"] = "s3://" + b.s3.Bucket + "/inputs/missing.nml"
	b.publish(t, "compute", "hpc-no-input", spec)
	ev := b.await(t, "hpc-no-input", 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeInputFetchFailed || ev.Data.Error.Stage != "submit" {
		t.Fatalf("event = %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if !strings.Contains(ev.Data.Error.Message, "compute.inputs[1]") {
		t.Errorf("message does not name the input: %s", ev.Data.Error.Message)
	}
	if n := b.compute.SubmitCount("hpc-no-input"); n != 0 {
		t.Errorf("submits = %d, want 0", n)
	}
	if len(b.deadLetters(t)) != 1 {
		t.Errorf("dead letters = %d, want 1", len(b.deadLetters(t)))
	}
}

// An input whose file lies on the cluster already, without "cover", fails
// the job saying which field to set to replace it: the platform's own
// words ("cover is not set") do not name the spec's field.
func TestComputeInputExistsSaysSetCover(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	const id = "hpc-input-exists"
	spec := computeSpec(t, b, id, "#!/bin/sh\ntrue\n")
	there := filepath.Join(b.compute.Root(), "public", "home", "alice", id, "params.nml")
	if err := os.MkdirAll(filepath.Dir(there), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(there, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.publish(t, "compute", id, spec)
	ev := b.await(t, id, 30*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error == nil {
		t.Fatalf("event = %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if want := `set "cover": true on compute.inputs[1] to replace it`; !strings.Contains(ev.Data.Error.Message, want) {
		t.Errorf("message %q lacks %q", ev.Data.Error.Message, want)
	}
}

// An S3 outage while a video job's s3:// input is probed delays the job
// (redelivered, nothing submitted) instead of failing it input_unreachable:
// the store is sluice's own, like the one its artifacts go to.
func TestVideoInputS3OutageIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	frame := b.putInput(t, "inputs/outage.png", testmedia.Fixture(t, "image-384x256.png"))
	endpoint, down := failingS3(t, b, "/inputs/")
	down.Store(true)
	b.start(t, func(c *config.Config) { c.S3Endpoint = endpoint })
	const id = "pf-s3-down"
	b.publish(t, "video", id, mediaJob(id, [2]string{"first_frame", frame}))

	rec := b.awaitRecord(t, id, 60*time.Second, func(r *state.Record) bool {
		return r.Attempts >= 2 || r.Status.Terminal()
	})
	if rec.Status.Terminal() {
		t.Fatalf("an S3 outage on an input ended the job: %s %+v", rec.Status, rec.Error)
	}
	if n := b.media.SubmitCount("preflight " + id); n != 0 {
		t.Fatalf("submitted %d times while an input could not be read", n)
	}
	storeBack(t, b, down, id)
}

// Upstream refusing a submit because it could not fetch an s3:// input
// while sluice's store is away (here without preflight, which would wait
// for the store first) delays the job instead of failing it: nothing was
// created upstream, and once the store is back the job runs, paid once.
func TestVideoInputS3OutageAtSubmitIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	frame := b.putInput(t, "inputs/outage-submit.png", testmedia.Fixture(t, "image-384x256.png"))
	endpoint, down := failingS3(t, b, "/inputs/")
	down.Store(true)
	b.start(t, func(c *config.Config) { c.S3Endpoint = endpoint; c.Preflight = runner.PreflightOff })
	const id = "submit-s3-down"
	b.publish(t, "video", id, mediaJob(id, [2]string{"first_frame", frame}))

	// Two refused submits, the second one classified (the record is back
	// at received): the store may come back without racing a submit.
	rec := b.awaitRecord(t, id, 60*time.Second, func(r *state.Record) bool {
		return r.Status.Terminal() ||
			r.Status == state.StatusReceived && b.media.Counters().Requests(apisim.EndpointVideoSubmit) >= 2
	})
	if rec.Status.Terminal() {
		t.Fatalf("upstream's failed fetch from sluice's store ended the job: %s %+v", rec.Status, rec.Error)
	}
	storeBack(t, b, down, id)
}

// Upstream refusing a submit because it could not fetch an s3:// input
// that sluice's store serves when sluice looks (an outage that ended
// between upstream's fetch and sluice's look; here the store fails only
// the GETs of the first presigned address, which is upstream's) submits
// again instead of failing the job: the refused submit created nothing.
func TestVideoInputStoreBackAtSubmitIsSubmittedAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	frame := b.putInput(t, "inputs/back-at-submit.png", testmedia.Fixture(t, "image-384x256.png"))
	var first atomic.Value
	endpoint := s3Failing(t, b, func(r *http.Request) bool {
		sig := r.URL.Query().Get("X-Amz-Signature")
		if sig == "" {
			return false // sluice's own reads
		}
		first.CompareAndSwap(nil, sig)
		return first.Load() == sig
	})
	b.start(t, func(c *config.Config) { c.S3Endpoint = endpoint })
	const id = "store-back-at-submit"
	b.publish(t, "video", id, mediaJob(id, [2]string{"first_frame", frame}))

	ev := b.await(t, id, 90*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("upstream's failed fetch from a store that serves the input ended the job: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("preflight " + id); n != 1 {
		t.Errorf("paid submits = %d, want 1", n)
	}
	if n := b.media.Counters().Requests(apisim.EndpointVideoSubmit); n != 2 {
		t.Errorf("submit requests = %d, want 2 (one refused, one paid)", n)
	}
}

// Upstream that can never fetch an s3:// input which sluice's store serves
// (its presigned address unreachable from upstream) fails the job with
// upstream's answer after a bounded number of refused submits, naming the
// cause; nothing is paid.
func TestVideoInputUpstreamCannotReachStore(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	frame := b.putInput(t, "inputs/unreachable-store.png", testmedia.Fixture(t, "image-384x256.png"))
	endpoint := s3Failing(t, b, func(r *http.Request) bool { return r.URL.Query().Has("X-Amz-Signature") })
	b.start(t, func(c *config.Config) { c.S3Endpoint = endpoint })
	const id = "store-unreachable"
	b.publish(t, "video", id, mediaJob(id, [2]string{"first_frame", frame}))

	ev := b.await(t, id, 90*time.Second)
	e := ev.Data.Error
	if ev.Data.Status != "failed" || e == nil || e.Code != "invalid_parameter" || e.Stage != state.StageSubmit ||
		!strings.Contains(e.Message, "refused 3 times") || !strings.Contains(e.Message, "input.media[0].url") {
		t.Fatalf("got %s %+v, want failed invalid_parameter at submit after 3 refusals naming the input", ev.Data.Status, e)
	}
	if strings.Contains(e.Message, "X-Amz-") {
		t.Errorf("the message carries a presigned query string: %s", e.Message)
	}
	if n := b.media.SubmitCount("preflight " + id); n != 0 {
		t.Errorf("paid submits = %d, want 0", n)
	}
	if n := b.media.Counters().Requests(apisim.EndpointVideoSubmit); n != 3 {
		t.Errorf("submit requests = %d, want 3", n)
	}
}

// storeBack ends a video job's S3 outage: the job must then succeed, paid
// once.
func storeBack(t *testing.T, b *bundle, down *atomic.Bool, id string) {
	t.Helper()
	down.Store(false)
	ev := b.await(t, id, 90*time.Second)
	if ev.Data.Status != "succeeded" {
		t.Fatalf("after S3 came back: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("preflight " + id); n != 1 {
		t.Errorf("paid submits = %d, want 1", n)
	}
}
