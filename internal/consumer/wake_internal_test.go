package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/order"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// startedIDs sends each delivered job's id on a channel and acks it.
type startedIDs chan string

func (s startedIDs) Handle(_ context.Context, d *Delivery) Outcome {
	s <- d.Msg.Headers().Get(contract.HeaderJobID)
	return Outcome{Action: Ack}
}

// With fair scheduling on, a job published while its kind's fetch loop is
// idle starts as soon as this worker's admission has copied it to its
// class queue, on a tenant subject as on sluice.jobs.<kind>: the admission
// wakes the loop, so the class queues' poll is not on the job's path. The
// poll is stretched to an hour, so a job left to it does not start.
func TestAdmittedJobWakesIdleFetchLoop(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 2*time.Minute)
	if err := contract.Ensure(ctx, n.JS, contract.Options{AckWait: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	started := make(startedIDs, 4)
	c, err := New(Config{JS: n.JS, Kinds: []string{"video"}, AckWait: 5 * time.Second, Policy: &order.Static{On: true}}, started)
	if err != nil {
		t.Fatal(err)
	}
	c.classes.of("video").wait = time.Hour
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(runCtx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	jobs := []struct{ id, subject string }{
		{"plain-1", contract.JobSubject("video")},
		{"tenant-1", contract.TenantSubject("video", "acme")},
		{"tenant-2", contract.TenantSubject("video", "acme")},
		{"plain-2", contract.JobSubject("video")},
	}
	for _, job := range jobs {
		m := nats.NewMsg(job.subject)
		m.Data = []byte(`{"kind":"video","id":"` + job.id + `"}`)
		if _, err := n.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-started:
			if id != job.id {
				t.Fatalf("started %s, want %s", id, job.id)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s on %s not started: the idle fetch loop waits for its poll, not for the admission", job.id, job.subject)
		}
	}
}
