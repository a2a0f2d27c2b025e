package consumer_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// orphan makes the messages of video up to seq orphans: the consumer is
// reset to deliver from seq+1 on, so its ack floor passes them while they
// stay in the work queue.
func (b *testBundle) orphan(t *testing.T, seq uint64) {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	if _, err := b.n.JS.ResetConsumerToSequence(ctx, contract.JobsStream, contract.ConsumerName("video"), seq+1); err != nil {
		t.Fatal(err)
	}
	if floor := b.info(t).AckFloor.Stream; floor != seq {
		t.Fatalf("ack floor %d after the reset; want %d", floor, seq)
	}
}

func (b *testBundle) stored(t *testing.T) uint64 {
	t.Helper()
	return testenv.StoredMsgs(t, b.n.JS, contract.JobsStream)
}

// sweeps counts the sweeps of a consumer (by its Waiting reports).
type sweeps struct{ n atomic.Int64 }

func (s *sweeps) waiting(kind string, _ int) {
	if kind == "video" {
		s.n.Add(1)
	}
}

// A message left in SLUICE_JOBS below its consumer's ack floor, which the
// consumer will never deliver again, is handed to the Handler by the sweep
// once two sweeps in a row found it, once per message (not again while a
// detached Handler still holds it), and leaves the stream when settled;
// messages above the floor are delivered as usual.
func TestSweepHandsOverOrphansOnce(t *testing.T) {
	t.Parallel()
	testHandsOverOrphansOnce(t, setup(t, 5*time.Second))
}

// The same on a three-node cluster at R3: the reset, the ack floor and the
// messages go through the consumer's and the stream's leaders.
func TestSweepHandsOverOrphansOnceOnACluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	b := &testBundle{n: c.Client(t)}
	if err := contract.Ensure(testenv.Context(t, 30*time.Second), b.n.JS, contract.Options{AckWait: 5 * time.Second, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	testHandsOverOrphansOnce(t, b)
}

func testHandsOverOrphansOnce(t *testing.T, b *testBundle) {
	b.publish(t, 2) // seq 1, 2
	b.orphan(t, 2)
	b.publish(t, 3) // job-0 and job-1 are duplicates: only job-2, seq 3, is stored

	var sw sweeps
	var orphaned sync.Map // kind -> *atomic.Int32
	type handled struct {
		n        atomic.Int32
		orphaned bool
		sweep    int64
	}
	var mu sync.Mutex
	calls := map[string]*handled{}
	var detached *consumer.Delivery
	b.run(t, consumer.Config{AckWait: 5 * time.Second, FetchWait: 200 * time.Millisecond, SweepInterval: 20 * time.Millisecond, Observer: consumer.Observer{
		Waiting: sw.waiting,
		Orphaned: func(kind string) {
			n, _ := orphaned.LoadOrStore(kind, new(atomic.Int32))
			n.(*atomic.Int32).Add(1)
		},
	}}, handlerFunc(func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
		key := d.Msg.Headers().Get(contract.HeaderMsgID)
		mu.Lock()
		h := calls[key]
		if h == nil {
			h = &handled{orphaned: d.Orphaned(), sweep: sw.n.Load()}
			calls[key] = h
		}
		h.n.Add(1)
		if d.Kind != "video" || d.AckWait() != 5*time.Second {
			t.Errorf("%s: kind %q, ack wait %s", key, d.Kind, d.AckWait())
		}
		mu.Unlock()
		if key == "job-0" {
			mu.Lock()
			detached = d
			mu.Unlock()
			return consumer.Outcome{Action: consumer.Detach}
		}
		return consumer.Outcome{Action: consumer.Ack}
	}))

	waitFor(t, "job-1 and job-2 to leave the stream", func() bool { return b.stored(t) == 1 })
	// While job-0 is detached, later sweeps find it again but leave it to
	// its Handler.
	from := sw.n.Load()
	waitFor(t, "five more sweeps", func() bool { return sw.n.Load() >= from+5 })
	mu.Lock()
	d := detached
	mu.Unlock()
	d.Settle(context.Background(), consumer.Outcome{Action: consumer.Ack})
	waitFor(t, "job-0 to leave the stream", func() bool { return b.stored(t) == 0 })

	mu.Lock()
	defer mu.Unlock()
	for key, want := range map[string]bool{"job-0": true, "job-1": true, "job-2": false} {
		h := calls[key]
		switch {
		case h == nil:
			t.Errorf("%s was never handled", key)
		case h.n.Load() != 1 || h.orphaned != want:
			t.Errorf("%s: handled %d times, orphaned %v; want once, %v", key, h.n.Load(), h.orphaned, want)
		case want && h.sweep < 2:
			t.Errorf("%s was handed over at sweep %d, before a second sweep found it", key, h.sweep)
		}
	}
	if n, ok := orphaned.Load("video"); !ok || n.(*atomic.Int32).Load() != 2 {
		t.Errorf("Observer.Orphaned counted %v; want 2 video", n)
	}
}

// The sweep asks the Gate as a pull does: while it lets no job start, an
// orphan stays in the stream however many sweeps find it; the first sweep
// it allows hands the orphan over, which keeps the reservation (the
// Handler's job holds it as a pulled job does).
func TestSweepHandsOverNoOrphanTheGateHolds(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	b.publish(t, 1)
	b.orphan(t, 1)
	gate := &budgetGate{}
	var sw sweeps
	var handled atomic.Int32
	b.run(t, consumer.Config{AckWait: 5 * time.Second, FetchWait: 200 * time.Millisecond, SweepInterval: 20 * time.Millisecond, Gate: gate,
		Observer: consumer.Observer{Waiting: sw.waiting}}, handlerFunc(func(context.Context, *consumer.Delivery) consumer.Outcome {
		handled.Add(1)
		return consumer.Outcome{Action: consumer.Ack}
	}))

	waitFor(t, "five sweeps", func() bool { return sw.n.Load() >= 5 })
	if n := handled.Load(); n != 0 {
		t.Fatalf("handed over %d times while the gate allowed nothing", n)
	}
	gate.add(1)
	waitFor(t, "the orphan to leave the stream", func() bool { return b.stored(t) == 0 })
	if n := handled.Load(); n != 1 {
		t.Errorf("handled %d times, want once", n)
	}
	gate.mu.Lock()
	defer gate.mu.Unlock()
	if gate.budget != 0 {
		t.Errorf("gate budget %d after the handover, want 0 (reserved by it)", gate.budget)
	}
}

// Under load, with two workers, retries and detached jobs (acks out of
// order, the ack floor behind many acked messages), the sweep hands
// nothing over: every message is delivered by its consumer only.
func TestSweepLeavesAHealthyQueueAlone(t *testing.T) {
	t.Parallel()
	if n := testHealthyQueue(t, setup(t, 5*time.Second)); n != 0 {
		t.Errorf("the sweep handed over %d acknowledged messages", n)
	}
}

// The same on a three-node cluster at R3, where an acknowledged message
// leaves the stream only once the stream's group has applied its deletion:
// the sweep may then hand over a message it found twice between the ack
// and the deletion (logged, not an error), but only an acknowledged one,
// never a message its consumer still holds or will deliver.
func TestSweepLeavesAHealthyQueueAloneOnACluster(t *testing.T) {
	t.Parallel()
	c := testenv.StartCluster(t, 3)
	b := &testBundle{n: c.Client(t)}
	if err := contract.Ensure(testenv.Context(t, 30*time.Second), b.n.JS, contract.Options{AckWait: 5 * time.Second, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged messages handed over: %d", testHealthyQueue(t, b))
}

// testHealthyQueue runs jobs through two consumers until their sweeps have
// found jobs waiting 40 times, checks that each was acknowledged, that the
// sweep handed over no message before it was acknowledged, and returns how
// many acknowledged ones it handed over.
func testHealthyQueue(t *testing.T, b *testBundle) (handedAcked int64) {
	var sw sweeps
	var busySweeps, handedOver, orphans, early atomic.Int64
	var acked sync.Map
	h := handlerFunc(func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
		seq := d.StreamSeq()
		if d.Orphaned() {
			handedOver.Add(1)
			if _, ok := acked.Load(seq); !ok {
				early.Add(1)
			}
			return consumer.Outcome{Action: consumer.Ack}
		}
		switch {
		case seq%5 == 0 && d.NumDelivered() == 1:
			return consumer.Outcome{Action: consumer.Retry, Delay: 30 * time.Millisecond}
		case seq%7 == 0:
			go func() {
				time.Sleep(time.Duration(seq%4) * 10 * time.Millisecond)
				acked.Store(seq, true)
				d.Settle(context.Background(), consumer.Outcome{Action: consumer.Ack})
			}()
			return consumer.Outcome{Action: consumer.Detach}
		}
		acked.Store(seq, true)
		return consumer.Outcome{Action: consumer.Ack}
	})
	cfg := consumer.Config{MaxInflight: 8, AckWait: 5 * time.Second, FetchWait: 100 * time.Millisecond, SweepInterval: 25 * time.Millisecond, Observer: consumer.Observer{
		Waiting: func(kind string, n int) {
			sw.waiting(kind, n)
			if kind == "video" && n > 0 {
				busySweeps.Add(1)
			}
		},
		Orphaned: func(string) { orphans.Add(1) },
	}}
	b.run(t, cfg, h)
	b.run(t, cfg, h)

	// Publish until the sweeps of both workers have found jobs waiting 40
	// times (whatever the machine's speed), then let the queue drain. A
	// burst of 200 outlasts several sweeps even on a loaded machine, where
	// the consumers drain a burst of 20 before a sweep looks.
	ctx := testenv.Context(t, 120*time.Second)
	published := 0
	for busySweeps.Load() < 40 {
		if published >= 20000 {
			t.Fatalf("%d jobs published, only %d sweeps found any waiting", published, busySweeps.Load())
		}
		for range 200 {
			m := nats.NewMsg(contract.JobSubject("video"))
			m.Data = []byte(`{}`)
			if _, err := b.n.JS.PublishMsg(ctx, m); err != nil {
				t.Fatal(err)
			}
			published++
		}
	}
	waitFor(t, "the queue to drain", func() bool { return b.stored(t) == 0 })
	from := sw.n.Load()
	waitFor(t, "two more sweeps", func() bool { return sw.n.Load() >= from+2 })
	n := 0
	acked.Range(func(any, any) bool { n++; return true })
	if n != published || early.Load() != 0 || handedOver.Load() != orphans.Load() {
		t.Errorf("published %d, acked %d; handed over by the sweep %d, %d of them before their ack; counted orphaned %d",
			published, n, handedOver.Load(), early.Load(), orphans.Load())
	}
	t.Logf("%d jobs, %d sweeps with jobs waiting", published, busySweeps.Load())
	return handedOver.Load()
}
