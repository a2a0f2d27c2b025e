package consumer_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/reach"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// handlerFunc adapts a function to consumer.Handler.
type handlerFunc func(ctx context.Context, d *consumer.Delivery) consumer.Outcome

func (f handlerFunc) Handle(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
	return f(ctx, d)
}

type testBundle struct {
	n *testenv.NATS
}

func setup(t *testing.T, ackWait time.Duration) *testBundle {
	t.Helper()
	n := testenv.StartNATS(t)
	if err := contract.Ensure(testenv.Context(t, 10*time.Second), n.JS, contract.Options{AckWait: ackWait}); err != nil {
		t.Fatal(err)
	}
	return &testBundle{n: n}
}

func (b *testBundle) publish(t *testing.T, count int) {
	t.Helper()
	for i := range count {
		m := nats.NewMsg(contract.JobSubject("video"))
		m.Data = []byte(fmt.Sprintf(`{"n":%d}`, i))
		m.Header.Set(contract.HeaderMsgID, fmt.Sprintf("job-%d", i))
		if _, err := b.n.JS.PublishMsg(testenv.Context(t, 5*time.Second), m); err != nil {
			t.Fatal(err)
		}
	}
}

func (b *testBundle) run(t *testing.T, cfg consumer.Config, h consumer.Handler) (stop func()) {
	t.Helper()
	cfg.JS, cfg.Kinds = b.n.JS, []string{"video"}
	c, err := consumer.New(cfg, h)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

func (b *testBundle) info(t *testing.T) *jetstream.ConsumerInfo {
	t.Helper()
	ctx := testenv.Context(t, 5*time.Second)
	c, err := b.n.JS.Consumer(ctx, contract.JobsStream, contract.ConsumerName("video"))
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPullsOnlyForFreeSlotsAndHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Second)
	b.publish(t, 10)
	var held atomic.Int32
	release := make(chan struct{})
	b.run(t, consumer.Config{MaxInflight: 3, AckWait: time.Second, FetchWait: 200 * time.Millisecond}, handlerFunc(
		func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
			held.Add(1)
			<-release
			return consumer.Outcome{Action: consumer.Ack}
		}))
	waitFor(t, "3 held jobs", func() bool { return held.Load() == 3 })
	// Hold for three AckWaits: without heartbeats the jobs would be
	// redelivered; without slots more would be pulled.
	time.Sleep(3 * time.Second)
	info := b.info(t)
	if held.Load() != 3 || info.NumAckPending != 3 || info.NumRedelivered != 0 || info.NumPending != 7 {
		t.Errorf("held %d, ack pending %d, redelivered %d, pending %d; want 3, 3, 0, 7",
			held.Load(), info.NumAckPending, info.NumRedelivered, info.NumPending)
	}
	close(release)
	waitFor(t, "all acked", func() bool { i := b.info(t); return i.NumPending == 0 && i.NumAckPending == 0 })
}

func TestDeadLetterCopiesAndTerms(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	b.publish(t, 1)
	b.run(t, consumer.Config{FetchWait: 200 * time.Millisecond}, handlerFunc(
		func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
			return consumer.Outcome{Action: consumer.DeadLetter, Reason: "invalid_spec: video.model:\nrequired", JobID: "job-0"}
		}))
	ctx := testenv.Context(t, 20*time.Second)
	var m *jetstream.RawStreamMsg
	waitFor(t, "the dead letter", func() bool {
		s, err := b.n.JS.Stream(ctx, contract.DLQStream)
		if err != nil {
			return false
		}
		m, err = s.GetMsg(ctx, 1)
		return err == nil
	})
	if m.Subject != "sluice.dlq.video" || string(m.Data) != `{"n":0}` || m.Header.Get(contract.HeaderError) != "invalid_spec: video.model: required" ||
		m.Header.Get(contract.HeaderJobID) != "job-0" || m.Header.Get(contract.HeaderMsgID) != "job-0" {
		t.Errorf("dead letter = %s %q %v", m.Subject, m.Data, m.Header)
	}
	waitFor(t, "the message terminated", func() bool { i := b.info(t); return i.NumAckPending == 0 && i.NumPending == 0 })
}

func TestStopReleasesHeldJobsToAnotherWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, 30*time.Second)
	b.publish(t, 4)
	var first atomic.Int32
	stop := b.run(t, consumer.Config{FetchWait: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second}, handlerFunc(
		func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
			first.Add(1)
			<-d.Stopping()
			return consumer.Outcome{Action: consumer.Release}
		}))
	waitFor(t, "4 held jobs", func() bool { return first.Load() == 4 })
	stop()
	var second sync.Map
	b.run(t, consumer.Config{FetchWait: 200 * time.Millisecond}, handlerFunc(
		func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
			second.Store(string(d.Msg.Data()), d.NumDelivered())
			return consumer.Outcome{Action: consumer.Ack}
		}))
	// Redelivered at once, not after the 30 s AckWait.
	waitFor(t, "the second worker to finish all 4", func() bool { i := b.info(t); return i.NumPending == 0 && i.NumAckPending == 0 })
	second.Range(func(k, v any) bool {
		if v.(uint64) > 3 {
			t.Errorf("%s delivered %d times", k, v)
		}
		return true
	})
}

func TestRetryNaksWithDelayAndPanicsDoNotKill(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	b.publish(t, 2)
	var calls sync.Map
	b.run(t, consumer.Config{FetchWait: 200 * time.Millisecond}, handlerFunc(
		func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
			key := string(d.Msg.Data())
			n, _ := calls.LoadOrStore(key, new(atomic.Int32))
			if n.(*atomic.Int32).Add(1) == 1 {
				if key == `{"n":1}` {
					panic("handler bug")
				}
				return consumer.Outcome{Action: consumer.Retry, Delay: 100 * time.Millisecond}
			}
			return consumer.Outcome{Action: consumer.Ack}
		}))
	waitFor(t, "the retried job", func() bool {
		n, ok := calls.Load(`{"n":0}`)
		return ok && n.(*atomic.Int32).Load() == 2
	})
	// The job whose handler panicked is held for a later retry, not lost.
	waitFor(t, "the panicked job to wait for its retry", func() bool {
		n, ok := calls.Load(`{"n":1}`)
		return ok && n.(*atomic.Int32).Load() == 1 && b.info(t).NumAckPending == 1
	})
}

func TestDetachedJobsKeepSlotsAndHeartbeatsUntilSettled(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Second)
	b.publish(t, 6)
	var mu sync.Mutex
	var detached []*consumer.Delivery
	stop := b.run(t, consumer.Config{MaxInflight: 2, AckWait: time.Second, FetchWait: 200 * time.Millisecond, ShutdownTimeout: 10 * time.Second}, handlerFunc(
		func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
			mu.Lock()
			detached = append(detached, d)
			mu.Unlock()
			return consumer.Outcome{Action: consumer.Detach}
		}))
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(detached) }
	waitFor(t, "2 detached jobs", func() bool { return count() == 2 })
	// No goroutine waits for them, yet they keep their slots and are not
	// delivered again for three AckWaits.
	time.Sleep(3 * time.Second)
	if i := b.info(t); count() != 2 || i.NumAckPending != 2 || i.NumRedelivered != 0 || i.NumPending != 4 {
		t.Errorf("detached %d, ack pending %d, redelivered %d, pending %d; want 2, 2, 0, 4", count(), i.NumAckPending, i.NumRedelivered, i.NumPending)
	}
	// Settling from another goroutine frees the slots; a second Settle is
	// ignored.
	mu.Lock()
	first := detached[:2]
	mu.Unlock()
	for _, d := range first {
		go func() {
			d.Settle(context.Background(), consumer.Outcome{Action: consumer.Ack})
			d.Settle(context.Background(), consumer.Outcome{Action: consumer.Retry})
		}()
	}
	waitFor(t, "2 more detached jobs", func() bool { return count() == 4 })
	// A graceful stop waits for detached jobs: settle them once it began.
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	mu.Lock()
	rest := detached[2:]
	mu.Unlock()
	for _, d := range rest {
		<-d.Stopping()
		select {
		case <-stopped:
			t.Fatal("the stop did not wait for detached jobs")
		default:
		}
		d.Settle(context.Background(), consumer.Outcome{Action: consumer.Release})
	}
	<-stopped
	// Two acked; the two released wait for redelivery with the two never
	// pulled.
	if i := b.info(t); uint64(i.NumAckPending)+i.NumPending != 4 || i.AckFloor.Consumer < 2 {
		t.Errorf("after the stop: ack pending %d, pending %d, ack floor %d; want 4 unsettled and 2 acked", i.NumAckPending, i.NumPending, i.AckFloor.Consumer)
	}
}

func TestStartPhaseBoundsRunningHandlers(t *testing.T) {
	t.Parallel()
	b := setup(t, time.Second)
	b.publish(t, 6)
	var running atomic.Int32
	ds := make(chan *consumer.Delivery, 6)
	release := make(chan struct{})
	b.run(t, consumer.Config{MaxInflight: 10, MaxStarting: 2, AckWait: time.Second, FetchWait: 200 * time.Millisecond}, handlerFunc(
		func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
			running.Add(1)
			ds <- d
			<-release
			return consumer.Outcome{Action: consumer.Ack}
		}))
	waitFor(t, "2 handlers", func() bool { return running.Load() == 2 })
	// All 6 are held (and kept alive for two AckWaits), only 2 started.
	time.Sleep(2 * time.Second)
	if i := b.info(t); running.Load() != 2 || i.NumAckPending != 6 || i.NumRedelivered != 0 {
		t.Errorf("running %d, ack pending %d, redelivered %d; want 2, 6, 0", running.Load(), i.NumAckPending, i.NumRedelivered)
	}
	// Each Started lets one more start; the rest finish as they return.
	(<-ds).Started()
	waitFor(t, "a third handler", func() bool { return running.Load() == 3 })
	close(release)
	waitFor(t, "all acked", func() bool { i := b.info(t); return i.NumPending == 0 && i.NumAckPending == 0 })
	if running.Load() != 6 {
		t.Errorf("%d handlers ran, want 6", running.Load())
	}
}

// A stop that passes its deadline while waiting for its own pulls, with no
// job held, has nothing to hand back and must not warn that it does.
func TestShutdownWarnsOnlyWhenJobsAreHeld(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	var logs testenv.SyncBuffer
	log := zerolog.New(&logs)
	for range 4 {
		stop := b.run(t, consumer.Config{Logger: &log, FetchWait: 500 * time.Millisecond, ShutdownTimeout: 100 * time.Millisecond},
			handlerFunc(func(context.Context, *consumer.Delivery) consumer.Outcome {
				return consumer.Outcome{Action: consumer.Ack}
			}))
		time.Sleep(100 * time.Millisecond) // a pull is pending
		stop()
	}
	if strings.Contains(logs.String(), "shutdown timeout") {
		t.Errorf("a stop with nothing held warned:\n%s", logs.String())
	}
}

// A pull that ends in "no responders" (here: the consumer is gone, as when
// its leader is out of reach) is followed by a backoff, not by the next
// pull at once, and the loop says once that it waits.
func TestFailedPullsBackOff(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	proxy := testenv.StartProxy(t, strings.TrimPrefix(b.n.URL, "nats://"), testenv.PullPattern)
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.SyncBuffer
	log := zerolog.New(&logs)
	c, err := consumer.New(consumer.Config{
		JS: js, Kinds: []string{"video"}, Logger: &log, FetchWait: 200 * time.Millisecond,
		Backoff: backoff.Exponential{Min: 100 * time.Millisecond, Max: 400 * time.Millisecond},
		Reach:   reach.New(reach.Config{Logger: &log}),
	}, handlerFunc(func(context.Context, *consumer.Delivery) consumer.Outcome {
		return consumer.Outcome{Action: consumer.Ack}
	}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "a first pull", func() bool { return proxy.Count() > 0 })

	if err := b.n.JS.DeleteConsumer(testenv.Context(t, 5*time.Second), contract.JobsStream, contract.ConsumerName("video")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the wait to be logged", func() bool { return strings.Contains(logs.String(), "waiting for JetStream") })
	before, start := proxy.Count(), time.Now()
	time.Sleep(2 * time.Second)
	pulls, elapsed := proxy.Count()-before, time.Since(start)
	// Every failed pull is followed by at least Backoff.Min.
	if bound := int64(elapsed/(100*time.Millisecond)) + 2; pulls > bound {
		t.Errorf("%d pulls in %s after the consumer went away; at most %d expected", pulls, elapsed, bound)
	}
	if n := strings.Count(logs.String(), "waiting for JetStream"); n != 1 {
		t.Errorf("said %d times that it waits, want once:\n%s", n, logs.String())
	}
}

// budgetGate lets a set number of jobs start, counting how often it is
// asked.
type budgetGate struct {
	mu     sync.Mutex
	budget int
	asked  int
}

func (g *budgetGate) Reserve(_ string, n int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.asked++
	n = min(n, g.budget)
	g.budget -= n
	return n
}

func (g *budgetGate) Unreserve(_ string, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.budget += n
}

func (g *budgetGate) add(n int) (asked int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.budget += n
	return g.asked
}

func TestPullsNoMoreThanTheGateAllows(t *testing.T) {
	t.Parallel()
	b := setup(t, 5*time.Second)
	b.publish(t, 10)
	gate := &budgetGate{budget: 2}
	var held atomic.Int32
	b.run(t, consumer.Config{MaxInflight: 8, AckWait: 5 * time.Second, FetchWait: 200 * time.Millisecond, Gate: gate}, handlerFunc(
		func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
			held.Add(1)
			<-d.Stopping()
			return consumer.Outcome{Action: consumer.Release}
		}))
	waitFor(t, "2 held jobs", func() bool { return held.Load() == 2 })
	asked := gate.add(0)
	waitFor(t, "the gate asked again and again", func() bool { return gate.add(0) >= asked+5 })
	if info := b.info(t); held.Load() != 2 || info.NumAckPending != 2 || info.NumPending != 8 {
		t.Fatalf("held %d, ack pending %d, pending %d with a gate of 2; want 2, 2, 8", held.Load(), info.NumAckPending, info.NumPending)
	}
	gate.add(1)
	waitFor(t, "a third held job", func() bool { return held.Load() == 3 })
	if info := b.info(t); info.NumAckPending != 3 {
		t.Fatalf("ack pending %d after the gate allowed one more; want 3", info.NumAckPending)
	}
}

// An Ack with Unconfirmed waits for the server's confirmation: the message
// is gone from SLUICE_JOBS and Unconfirmed does not run. When no
// confirmation comes (here the durable consumer was deleted meanwhile, so
// nobody answers the ack), Unconfirmed runs.
func TestConfirmedAckRunsUnconfirmedOnlyWithoutAnAnswer(t *testing.T) {
	t.Parallel()
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("consumer deleted %v", lose), func(t *testing.T) {
			t.Parallel()
			b := setup(t, 5*time.Second)
			b.publish(t, 1)
			var unconfirmed atomic.Int32
			b.run(t, consumer.Config{FetchWait: 200 * time.Millisecond}, handlerFunc(
				func(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
					if lose {
						if err := b.n.JS.DeleteConsumer(ctx, contract.JobsStream, contract.ConsumerName("video")); err != nil {
							t.Error(err)
						}
					}
					return consumer.Outcome{Action: consumer.Ack, Unconfirmed: func(context.Context) {
						unconfirmed.Add(1)
					}}
				}))
			waitFor(t, "the message settled", func() bool {
				return unconfirmed.Load() > 0 || testenv.StoredMsgs(t, b.n.JS, contract.JobsStream) == 0
			})
			if got := unconfirmed.Load() == 1; got != lose {
				t.Errorf("Unconfirmed ran %d times", unconfirmed.Load())
			}
			if n := testenv.StoredMsgs(t, b.n.JS, contract.JobsStream); !lose && n != 0 {
				t.Errorf("%d messages left in %s after a confirmed ack", n, contract.JobsStream)
			}
		})
	}
}
