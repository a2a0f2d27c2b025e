package worker_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// startStoreAt starts the embedded S3 store on addr with its files in dir
// and the bundle's bucket.
func startStoreAt(t *testing.T, addr, dir, bucket string) *s3dev.Server {
	t.Helper()
	srv, err := s3dev.Start(context.Background(), s3dev.Config{Dir: dir, Addr: addr, Buckets: []string{bucket}})
	if err != nil {
		t.Fatalf("start s3 store on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// readyz returns the worker's /readyz status and body.
func (b *bundle) readyz(t *testing.T) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + b.ep.HTTPAddr + "/readyz")
	if err != nil {
		t.Fatalf("readyz: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// storeProbeFailures reads sluice_s3_probe_failures_total from /metrics.
func (b *bundle) storeProbeFailures(t *testing.T) int {
	t.Helper()
	resp, err := http.Get("http://" + b.ep.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "sluice_s3_probe_failures_total "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

// TestStoreAwayTakesNoPaidWork: a worker whose S3 endpoint answers nothing
// is not ready, says why (naming the endpoint, not the credentials), and
// pulls no job, so nothing is submitted upstream; once the store answers,
// it becomes ready on its own and the job succeeds with one submit.
func TestStoreAwayTakesNoPaidWork(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	addr := freeAddr(t)
	endpoint := "http://" + addr
	b.start(t, func(c *config.Config) { c.S3Endpoint = endpoint })

	code, body := b.readyz(t)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "artifact store unreachable") || !strings.Contains(body, "SLUICE_S3_ENDPOINT="+endpoint) {
		t.Fatalf("readyz with the store away = %d %q, want 503 naming SLUICE_S3_ENDPOINT=%s", code, body, endpoint)
	}
	const prompt = "a lighthouse while the store is away"
	b.publish(t, "video", "store-away", videoSpec("store-away", prompt))
	// The worker has looked at the store again, twice, since the job was
	// published, its pulls gated all along.
	seen := b.storeProbeFailures(t)
	waitFor(t, time.Minute, "two more failed store probes", func() bool { return b.storeProbeFailures(t) >= seen+2 })
	if n := b.media.SubmitCount(prompt); n != 0 {
		t.Fatalf("submits while the store is away = %d, want 0", n)
	}

	startStoreAt(t, addr, t.TempDir(), b.cfg.S3Bucket)
	waitFor(t, time.Minute, "ready once the store answers", func() bool { code, _ := b.readyz(t); return code == http.StatusOK })
	if ev := b.await(t, "store-away", time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("job = %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	logs := b.logs.String()
	if !strings.Contains(logs, "SLUICE_S3_ENDPOINT="+endpoint) {
		t.Errorf("no log line names SLUICE_S3_ENDPOINT=%s", endpoint)
	}
	if strings.Count(logs, "artifact store unreachable: taking no new job") != 1 || strings.Count(logs, "artifact store reachable again") != 1 {
		t.Errorf("want one log line when the store went away and one when it came back")
	}
}

// TestHeldJobWaitsForStoreWithItsLastError: a job whose task ended while
// the store is away keeps its task, shows why it stays (its last error, in
// the record and in enqueue status), and succeeds once the store is back,
// with no second submit; the last error is gone from the terminal record.
func TestHeldJobWaitsForStoreWithItsLastError(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 2 * time.Second})
	addr, dir := freeAddr(t), t.TempDir()
	srv := startStoreAt(t, addr, dir, b.cfg.S3Bucket)
	// The copies retry for about a minute before the job is handed back:
	// the task's deadline must not be what ends it.
	b.start(t, func(c *config.Config) { c.S3Endpoint, c.TaskTimeout = "http://"+addr, time.Hour })

	const prompt = "a kite over a store outage"
	b.publish(t, "video", "held-away", videoSpec("held-away", prompt))
	b.awaitStatus(t, "held-away", state.StatusRunning, time.Minute)
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	var rec *state.Record
	waitFor(t, 2*time.Minute, "the job's last error", func() bool {
		rec = b.record(t, "held-away")
		return rec.LastError != nil
	})
	if rec.LastError.Step != state.StatusCollecting || !strings.Contains(rec.LastError.Message, "copy") || rec.Upstream.TaskID == "" {
		t.Errorf("record while the store is away: status %s, last error %+v, task %q", rec.Status, rec.LastError, rec.Upstream.TaskID)
	}
	out, _ := b.enqueue(t, "", "status", "held-away")
	if !strings.Contains(out, "retrying") || !strings.Contains(out, rec.LastError.Message) {
		t.Errorf("enqueue status does not show the last error:\n%s", out)
	}

	startStoreAt(t, addr, dir, b.cfg.S3Bucket)
	if ev := b.await(t, "held-away", 2*time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("job = %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	if rec := b.record(t, "held-away"); rec.LastError != nil {
		t.Errorf("terminal record keeps its last error %+v", rec.LastError)
	}
}

// TestStoreAwayHandsOverNoOrphan: the sweep asks the same gate as the
// pulls, so a worker whose store is away does not take an orphaned job
// (its message below its consumer's ack floor, never submitted) and pays
// for nothing; once the store answers, the sweep hands the job over and it
// succeeds with one submit.
func TestStoreAwayHandsOverNoOrphan(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	const prompt = "an orphan while the store is away"
	ctx := testenv.Context(t, 10*time.Second)
	if err := contract.Ensure(ctx, b.nats.JS, contract.Options{AckWait: b.cfg.AckWait}); err != nil {
		t.Fatal(err)
	}
	seq := b.publish(t, "video", "orphan-away", videoSpec("orphan-away", prompt))
	if _, err := b.nats.JS.ResetConsumerToSequence(ctx, contract.JobsStream, contract.ConsumerName("video"), seq+1); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	b.start(t, func(c *config.Config) { c.S3Endpoint = "http://" + addr })

	// The sweep found the orphan twice (when it would hand it over) and
	// left it; or, without the gate, handed it over and submitted it.
	waitFor(t, time.Minute, "the sweep to leave the orphan in the stream", func() bool {
		return logLines(b, consumer.LogOrphanGated, `"job_id":"orphan-away"`) > 0 || b.media.SubmitCount(prompt) > 0
	})
	seen := b.storeProbeFailures(t)
	waitFor(t, time.Minute, "two more failed store probes", func() bool { return b.storeProbeFailures(t) >= seen+2 })
	if n := b.media.SubmitCount(prompt); n != 0 {
		t.Fatalf("submits while the store is away = %d, want 0", n)
	}
	if n := logLines(b, consumer.LogOrphanGated, `"job_id":"orphan-away"`); n != 1 {
		t.Errorf("the gated orphan was logged %d times, want once", n)
	}

	startStoreAt(t, addr, t.TempDir(), b.cfg.S3Bucket)
	if ev := b.await(t, "orphan-away", time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("job = %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	if n := logLines(b, consumer.LogOrphan, `"job_id":"orphan-away"`); n != 1 {
		t.Errorf("the orphan's handover was logged %d times, want once", n)
	}
}
