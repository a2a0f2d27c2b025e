package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// Jobs whose messages stay in SLUICE_JOBS at or below their consumer's ack
// floor (the consumer will never deliver them again) are handed over by
// the sweep of two workers at once and each ends once, submitted once; one
// whose record a delivery wrote within a lease is left to that delivery
// until the record has been left alone for a lease, then resumed.
func TestOrphanedJobsEndOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// A delivery "holds" orphan-busy: it wrote the record just now.
	left := time.Now()
	b.leaveRecord(t, "orphan-busy", func(r *state.Record) { r.Kind, r.Status = "video", state.StatusReceived })
	b.publish(t, "video", "orphan-new", videoSpec("orphan-new", "an orphan"))
	b.publish(t, "video", "orphan-busy", videoSpec("orphan-busy", "an orphan with a busy record"))
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := b.nats.JS.ResetConsumerToSequence(ctx, contract.JobsStream, contract.ConsumerName("video"), 3); err != nil {
		t.Fatal(err)
	}
	b.publish(t, "video", "delivered", videoSpec("delivered", "a job its consumer delivers"))

	b.start(t)
	b.start(t, func(c *config.Config) { c.WorkerName = "test-worker-2" })

	for _, id := range []string{"orphan-new", "orphan-busy", "delivered"} {
		if ev := b.await(t, id, 60*time.Second); ev.Data.Status != "succeeded" {
			t.Errorf("%s: %s %+v", id, ev.Data.Status, ev.Data.Error)
		}
	}
	for _, prompt := range []string{"an orphan", "an orphan with a busy record", "a job its consumer delivers"} {
		if n := b.media.SubmitCount(prompt); n != 1 {
			t.Errorf("%q submitted %d times", prompt, n)
		}
	}
	if rec := b.record(t, "orphan-busy"); rec.FinishedAt == nil || rec.FinishedAt.Sub(left) < b.cfg.AckWait {
		t.Errorf("orphan-busy finished at %v, less than a lease (%s) after its record was written at %v", rec.FinishedAt, b.cfg.AckWait, left)
	}
	waitFor := time.Now().Add(20 * time.Second)
	for b.pendingJobs(t) != 0 {
		if time.Now().After(waitFor) {
			t.Fatalf("%d messages left in %s", b.pendingJobs(t), contract.JobsStream)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range []string{"orphan-new", "orphan-busy"} {
		if n := logLines(b, "handing it over", `"job_id":"`+id+`"`); n < 1 || n > 2 {
			t.Errorf("%s: handover logged %d times; want once per worker that handed it over", id, n)
		}
	}
	if n := logLines(b, "handing it over", `"job_id":"delivered"`); n != 0 {
		t.Errorf("a delivered job was handed over %d times", n)
	}
	t.Logf("handovers logged: orphan-new %d, orphan-busy %d; left to another delivery %d times",
		logLines(b, "handing it over", `"job_id":"orphan-new"`), logLines(b, "handing it over", `"job_id":"orphan-busy"`), logLines(b, "leaving the job to it"))
	// The last worker started handed orphan-busy over at least.
	if text := b.scrape(t); !strings.Contains(text, `sluice_messages_orphaned_total{kind="video"}`) {
		t.Errorf("/metrics lacks sluice_messages_orphaned_total:\n%s", grepLines(text, "sluice_messages"))
	}
	if !strings.Contains(b.logs.String(), "leaving the job to it") {
		t.Error("orphan-busy was not left to the delivery that wrote its record")
	}
}

// The stuck jobs of a long cluster fault run, made on purpose: a worker
// holds a submitted job while its consumer's ack floor passes the job's
// message (a reset here), then goes away. Its consumer never delivers the
// job again; another worker's sweep hands it over once the record has been
// left alone for a lease, and the job resumes its task: not submitted
// again, one terminal event.
func TestOrphanedSubmittedJobResumesItsTask(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 3 * time.Second})
	stopA := b.start(t, func(c *config.Config) { c.WorkerName = "worker-a" })
	b.publish(t, "video", "stuck-1", videoSpec("stuck-1", "a job left below the ack floor"))
	b.awaitRecord(t, "stuck-1", 20*time.Second, func(r *state.Record) bool { return r.Status == state.StatusSubmitted })
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := b.nats.JS.ResetConsumerToSequence(ctx, contract.JobsStream, contract.ConsumerName("video"), 2); err != nil {
		t.Fatal(err)
	}
	stopA()
	b.start(t, func(c *config.Config) { c.WorkerName = "worker-b" })

	if ev := b.await(t, "stuck-1", 60*time.Second); ev.Data.Status != "succeeded" {
		t.Fatalf("stuck-1: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("a job left below the ack floor"); n != 1 {
		t.Errorf("submitted %d times, want once", n)
	}
	if rec := b.record(t, "stuck-1"); rec.Attempts != 2 || rec.Submits != 1 {
		t.Errorf("record: attempts %d, submits %d; want 2 and 1", rec.Attempts, rec.Submits)
	}
	// worker-b handed it over (worker-a may have found it too before it
	// stopped, and left it to its own delivery).
	if n := logLines(b, "handing it over", `"job_id":"stuck-1"`); n < 1 {
		t.Error("the job was not handed over by a sweep")
	}
}

// A handed-over message always looks first-delivered (the sweep reads it
// from the stream), so the delivery limit counts an orphan's deliveries by
// its record: a job handed over more often than SLUICE_MAX_DELIVER (10 in
// these tests; here a record that counted 20 deliveries already, as a
// handler that keeps failing on it would leave) fails too_many_deliveries,
// dead-lettered, instead of being handed over for ever; nothing is
// submitted.
func TestOrphanObeysTheDeliveryLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.leaveRecord(t, "orphan-worn", func(r *state.Record) { r.Kind, r.Status, r.Attempts = "video", state.StatusReceived, 20 })
	b.publish(t, "video", "orphan-worn", videoSpec("orphan-worn", "an orphan delivered too often"))
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := b.nats.JS.ResetConsumerToSequence(ctx, contract.JobsStream, contract.ConsumerName("video"), 2); err != nil {
		t.Fatal(err)
	}
	b.start(t)

	ev := b.await(t, "orphan-worn", 60*time.Second)
	if e := ev.Data.Error; ev.Data.Status != "failed" || e == nil || e.Code != "too_many_deliveries" || !strings.Contains(e.Message, "delivered 21 times") {
		t.Fatalf("orphan-worn: %s %+v; want failed too_many_deliveries after 21 deliveries", ev.Data.Status, ev.Data.Error)
	}
	if n := b.media.SubmitCount("an orphan delivered too often"); n != 0 {
		t.Errorf("submitted %d times", n)
	}
	if n := logLines(b, "handing it over", `"job_id":"orphan-worn"`); n != 1 {
		t.Errorf("handover logged %d times, want 1", n)
	}
}
