package main

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// secret is the signature of the signed URLs the fake worker records; it
// must never show up in enqueue's output.
const secret = "SECRETSIGNATURE"

// fakeWorker plays the worker's part over the real NATS layout: it
// consumes the jobs of every kind from the durable consumers, writes
// state records and publishes events, and answers cancel requests. The
// label "outcome" of a spec decides how its job ends:
//
//	succeed (or none)  submitted, running, succeeded with one artifact
//	fail               submitted, running, failed
//	cancel             submitted, running, cancelled
//	hold               submitted, running, then cancelled once the cancel flag is set
//
// A job whose record already carries the cancel flag ends cancelled
// without being submitted.
type fakeWorker struct {
	t     *testing.T
	js    jetstream.JetStream
	store *state.Store
	pub   *events.Publisher
	ctx   context.Context
	wg    sync.WaitGroup
}

// setUp creates the contract's streams, consumers and bucket, as a worker
// does at start.
func setUp(t *testing.T, n *testenv.NATS) *state.Store {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatalf("ensure: %v", err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatalf("bucket: %v", err)
	}
	return state.NewStore(kv, "fake-worker", nil)
}

func startFakeWorker(t *testing.T, n *testenv.NATS) *fakeWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &fakeWorker{t: t, js: n.JS, store: setUp(t, n), pub: events.NewPublisher(n.JS), ctx: ctx}
	sub, err := n.Conn.Subscribe(contract.CancelSubject, w.answerCancel)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	var stops []func()
	for _, kind := range contract.Kinds {
		cons, err := n.JS.Consumer(ctx, contract.JobsStream, contract.ConsumerName(kind))
		if err != nil {
			t.Fatalf("consumer %s: %v", kind, err)
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				w.process(kind, m)
			}()
		})
		if err != nil {
			t.Fatalf("consume %s: %v", kind, err)
		}
		stops = append(stops, cc.Stop)
	}
	t.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
		_ = sub.Unsubscribe()
		cancel()
		w.wg.Wait()
	})
	return w
}

// step writes the record and publishes the event of status.
func (w *fakeWorker) step(id string, status state.Status, fn func(*state.Record)) *state.Record {
	rec, err := w.store.Update(w.ctx, id, func(r *state.Record) error {
		r.Status = status
		if fn != nil {
			fn(r)
		}
		return nil
	})
	if err != nil {
		w.t.Errorf("fake worker: update %s: %v", id, err)
		return nil
	}
	if err := w.pub.Publish(w.ctx, events.FromRecord(rec, status, time.Now())); err != nil && w.ctx.Err() == nil {
		w.t.Errorf("fake worker: publish %s: %v", id, err)
	}
	return rec
}

func (w *fakeWorker) process(kind string, m jetstream.Msg) {
	spec, err := jobspec.Decode(m.Data(), jobspec.Kind(kind))
	if err != nil {
		w.t.Errorf("fake worker: invalid spec reached the worker: %v", err)
		_ = m.Term()
		return
	}
	id := spec.ID
	rec, err := w.store.Update(w.ctx, id, func(r *state.Record) error {
		r.Kind, r.Labels, r.Status = kind, spec.Labels, state.StatusReceived
		r.Attempts++
		return nil
	})
	if err != nil {
		w.t.Errorf("fake worker: receive %s: %v", id, err)
		return
	}
	defer func() { _ = m.Ack() }()
	if rec.Cancel != nil {
		w.step(id, state.StatusCancelled, nil)
		return
	}
	w.step(id, state.StatusSubmitted, func(r *state.Record) {
		r.Upstream = state.Upstream{TaskID: "t-" + id, RequestID: "r-" + id, Status: "pending"}
		now := time.Now().UTC()
		r.SubmittedAt = &now
	})
	w.step(id, state.StatusRunning, func(r *state.Record) { r.Upstream.Status = "running" })
	finish := func(status state.Status, fn func(*state.Record)) {
		w.step(id, status, func(r *state.Record) {
			r.Upstream.Status = string(status)
			now := time.Now().UTC()
			r.FinishedAt = &now
			if fn != nil {
				fn(r)
			}
		})
	}
	switch spec.Labels["outcome"] {
	case "fail":
		finish(state.StatusFailed, func(r *state.Record) {
			r.Error = &state.Error{Code: "InternalError", Message: "the model fell over", Stage: state.StagePoll}
		})
	case "cancel":
		finish(state.StatusCancelled, nil)
	case "hold":
		for {
			rec, _, err := w.store.Get(w.ctx, id)
			if err == nil && rec.Cancel != nil {
				finish(state.StatusCancelled, nil)
				return
			}
			select {
			case <-w.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	default:
		finish(state.StatusSucceeded, func(r *state.Record) { succeed(r, kind) })
	}
}

// succeed fills a record as a succeeded job's, signed result URL included.
func succeed(r *state.Record, kind string) {
	signed := "https://cdn.example.test/out/" + r.JobID + ".mp4?X-Amz-Signature=" + secret
	r.Results = []string{signed}
	r.Artifacts = []state.Artifact{{
		URL:         "s3://media/sluice/" + kind + "/" + r.JobID + "/result-0.mp4",
		Bucket:      "media",
		Key:         "sluice/" + kind + "/" + r.JobID + "/result-0.mp4",
		Size:        1048576,
		SHA256:      "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		ContentType: "video/mp4",
		Source:      signed,
	}}
	r.Usage = json.RawMessage(`{"video_count":1,"video_duration":5}`)
}

// answerCancel plays the worker's side of sluice.control.cancel.
func (w *fakeWorker) answerCancel(m *nats.Msg) {
	var req contract.CancelRequest
	var reply contract.CancelReply
	if err := json.Unmarshal(m.Data, &req); err != nil || !jobspec.ValidID(req.JobID) {
		reply.Error = "bad request"
	} else {
		reply.JobID = req.JobID
		rec, err := w.store.RequestCancel(w.ctx, req.JobID)
		switch {
		case err != nil:
			reply.Error = "cannot record the cancel: " + err.Error()
		case rec.Status.Terminal():
			reply.Cancel, reply.Status = contract.CancelTerminal, string(rec.Status)
		default:
			reply.Cancel, reply.Status = contract.CancelRequested, string(rec.Status)
		}
	}
	b, _ := json.Marshal(reply)
	_ = m.Respond(b)
}
