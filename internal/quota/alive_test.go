package quota_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestDeadHoldersJobsAreHandedOver runs three workers' sides of a quota of
// 3, each on its own connection: "doomed" holds a lease for a job it was
// delivered (AckWait ten minutes), "old" holds one without answering on an
// alive subject (a worker of an older version), "heir" watches. When
// doomed's connection closes (and, in "replaced", a new process starts
// under its name at once), heir hands its lease back and Naks its
// delivery, which JetStream delivers again at once; old's lease stays.
func TestDeadHoldersJobsAreHandedOver(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"silent", "replaced"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t, 60*time.Second)
			n, cons := aliveStack(ctx, t)
			heirLog := &testenv.SyncBuffer{}
			doomed, doomedConn := startFleet(ctx, t, n, "doomed", true, nil)
			old, _ := startFleet(ctx, t, n, "old", false, nil)
			logger := zerolog.New(heirLog)
			startFleet(ctx, t, n, "heir", true, &logger)

			// doomed is delivered job a and takes its lease with the
			// delivery's ack subject; old takes one for job b.
			doomedJS, _ := jetstream.New(doomedConn)
			doomedCons, err := doomedJS.Consumer(ctx, "JOBS", "work")
			if err != nil {
				t.Fatal(err)
			}
			msg := fetchOne(t, doomedCons)
			if _, err := doomed.Acquire(ctx, "video", "a", msg.Reply()); err != nil {
				t.Fatal(err)
			}
			if _, err := old.Acquire(ctx, "video", "b", ""); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the heir hears doomed", func() bool { return strings.Contains(heirLog.String(), quota.LogHeard) })

			doomedConn.Close()
			if how == "replaced" {
				startFleet(ctx, t, n, "doomed", true, nil)
			}
			eventually(t, "doomed's lease handed back", func() bool {
				return strings.Contains(heirLog.String(), quota.LogHandedOver)
			})
			if !strings.Contains(heirLog.String(), `"death":"`+how+`"`) {
				t.Errorf("the heir did not find doomed %s:\n%s", how, heirLog.String())
			}
			// Job a comes back at once, ten minutes before its AckWait.
			m := fetchOne(t, cons)
			if md, _ := m.Metadata(); md.NumDelivered != 2 || string(m.Data()) != "job a" {
				t.Fatalf("delivered again: %q, delivery %d", m.Data(), md.NumDelivered)
			}
			// a counts, handed back, until its next delivery takes it
			// over; old's lease (b) is untouched.
			sts, err := quota.Read(ctx, n.JS, time.Now())
			if err != nil || len(sts) != 1 || sts[0].InUse != 2 {
				t.Fatalf("after the hand-over: %+v, %v; want a (handed back) and b in use", sts, err)
			}
			if strings.Contains(heirLog.String(), `"worker":"old"`) {
				t.Errorf("the heir judged a worker that never answered on its alive subject:\n%s", heirLog.String())
			}
		})
	}
}

// aliveStack starts NATS with the quota bucket and a stream JOBS holding
// one job, "job a", behind a durable consumer "work" of AckWait ten
// minutes.
func aliveStack(ctx context.Context, t *testing.T) (*testenv.NATS, jetstream.Consumer) {
	t.Helper()
	n := testenv.StartNATS(t)
	if _, err := n.JS.CreateOrUpdateKeyValue(ctx, quota.BucketConfig(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "JOBS", Subjects: []string{"jobs.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := n.JS.CreateOrUpdateConsumer(ctx, "JOBS", jetstream.ConsumerConfig{Durable: "work", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.JS.Publish(ctx, "jobs.video", []byte("job a")); err != nil {
		t.Fatal(err)
	}
	return n, cons
}

// startFleet runs holder's side of a media quota of 3 on a connection of
// its own, watching the others when withConn.
func startFleet(ctx context.Context, t *testing.T, n *testenv.NATS, holder string, withConn bool, log *zerolog.Logger) (*quota.Fleet, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, quota.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg := quota.Config{KV: kv, Holder: holder, Limits: quota.Limits{MediaTasks: 3}, TTL: 10 * time.Minute, Logger: log}
	if withConn {
		cfg.Conn = nc
	}
	f, err := quota.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go f.Run(rctx)
	return f, nc
}

// fetchOne pulls one message from cons.
func fetchOne(t *testing.T, cons jetstream.Consumer) jetstream.Msg {
	t.Helper()
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m := <-batch.Messages()
	if m == nil {
		t.Fatal("no job delivered")
	}
	return m
}
