package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// received is one POST a receiver got.
type received struct {
	header http.Header
	body   []byte
}

// receiver is an httptest server that records every POST and answers
// with answer (200 when nil).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int, w http.ResponseWriter) // n: 1-based request number
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter)) *receiver {
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		n := len(r.got)
		r.mu.Unlock()
		if r.answer != nil {
			r.answer(n, w)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// waitFor polls cond until it holds or 30s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// verify checks a delivery with both reference libraries and secret.
func verify(secret string, r received) error {
	sw, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	if err := sw.Verify(r.body, r.header); err != nil {
		return fmt.Errorf("standard-webhooks: %w", err)
	}
	sv, err := svix.NewWebhook(secret)
	if err != nil {
		return err
	}
	if err := sv.Verify(r.body, r.header); err != nil {
		return fmt.Errorf("svix: %w", err)
	}
	return nil
}

type testBundle struct {
	ctx   context.Context
	nats  *testenv.NATS
	store *webhooks.Store
}

// setup starts NATS with the contract's streams and webhooks' objects.
func setup(t *testing.T) *testBundle {
	t.Helper()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 2*time.Minute)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	st, err := webhooks.Ensure(ctx, n.JS, webhooks.Options{AckWait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{ctx: ctx, nats: n, store: st}
}

// run starts a dispatcher and a sender with cfg until the returned stop.
func (b *testBundle) run(t *testing.T, cfg webhooks.SenderConfig) (stop func()) {
	t.Helper()
	return b.runWith(t, cfg, webhooks.URLPolicy{AllowPrivate: true, AllowHTTP: true})
}

// runWith is run with a URL policy.
func (b *testBundle) runWith(t *testing.T, cfg webhooks.SenderConfig, policy webhooks.URLPolicy) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(b.ctx)
	cache, err := b.store.WatchSubscriptions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := b.nats.JS.KeyValue(ctx, contract.SpecsBucket)
	if err != nil {
		t.Fatal(err)
	}
	d := webhooks.NewDispatcher(webhooks.DispatcherConfig{JS: b.nats.JS, Store: b.store, Cache: cache, Specs: specs, Log: zerolog.Nop()})
	cfg.JS, cfg.Store, cfg.Cache = b.nats.JS, b.store, cache
	cfg.Policy = policy
	if cfg.Schedule == nil {
		cfg.Schedule = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}
	}
	s := webhooks.NewSender(cfg)
	var wg sync.WaitGroup
	wg.Go(func() { _ = d.Run(ctx) })
	wg.Go(func() { _ = s.Run(ctx) })
	return func() { cancel(); wg.Wait() }
}

// publishEvent stores an event of job id with status in SLUICE_EVENTS.
func (b *testBundle) publishEvent(t *testing.T, job, kind, status, tenant string) string {
	t.Helper()
	id := contract.EventID(job, status)
	ev := map[string]any{"specversion": "1.0", "id": id, "source": "sluice/worker", "type": "sluice.job." + status,
		"subject": job, "time": time.Now().UTC().Format(time.RFC3339), "datacontenttype": "application/json",
		"data": map[string]any{"job_id": job, "kind": kind, "status": status, "tenant": tenant, "labels": map[string]string{"team": "a"}}}
	data, _ := json.Marshal(ev)
	msg := nats.NewMsg(contract.EventSubject(kind, status))
	msg.Data = data
	msg.Header.Set(contract.HeaderMsgID, id)
	if _, err := b.nats.JS.PublishMsg(b.ctx, msg); err != nil {
		t.Fatal(err)
	}
	return id
}

func (b *testBundle) add(t *testing.T, url string, events ...string) webhooks.Subscription {
	t.Helper()
	sub, err := b.store.Add(b.ctx, webhooks.Subscription{URL: url, Events: events}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

func TestDeliverySignedForBothLibraries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, nil)
	sub := b.add(t, rcv.srv.URL+"/hook?token=abc", "video.succeeded")
	defer b.run(t, webhooks.SenderConfig{})()

	b.publishEvent(t, "clip-1", "video", "running", "default") // not wanted
	id := b.publishEvent(t, "clip-1", "video", "succeeded", "default")
	waitFor(t, "the delivery", func() bool { return len(rcv.all()) > 0 })
	got := rcv.all()[0]
	if err := verify(sub.Secret, got); err != nil {
		t.Fatalf("reference libraries refuse the delivery: %v", err)
	}
	if got.header.Get("webhook-id") != id || got.header.Get("Content-Type") != contract.CloudEventsContentType {
		t.Errorf("webhook-id %q, Content-Type %q; want %q, %q", got.header.Get("webhook-id"),
			got.header.Get("Content-Type"), id, contract.CloudEventsContentType)
	}
	if err := verify(webhooks.NewSecret(), got); err == nil {
		t.Error("the libraries accept the delivery with another secret")
	}
	waitFor(t, "the record", func() bool {
		d, err := b.store.Delivery(b.ctx, sub.ID+"."+id)
		return err == nil && d.Status == webhooks.StatusDelivered && len(d.Attempts) == 1
	})
	if n := len(rcv.all()); n != 1 {
		t.Errorf("receiver got %d deliveries, want 1 (the running event is not subscribed)", n)
	}
}

func TestStaleTimestampRefusedByLibraries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusBadRequest) })
	sub := b.add(t, rcv.srv.URL)
	stale := func() time.Time { return time.Now().Add(-10 * time.Minute) }
	defer b.run(t, webhooks.SenderConfig{Now: stale})()
	b.publishEvent(t, "old-1", "speech", "failed", "default")
	waitFor(t, "the delivery", func() bool { return len(rcv.all()) > 0 })
	got := rcv.all()[0]
	sw, _ := standardwebhooks.NewWebhook(sub.Secret)
	if err := sw.Verify(got.body, got.header); err == nil {
		t.Error("standard-webhooks accepts a timestamp 10 minutes old")
	}
	sv, _ := svix.NewWebhook(sub.Secret)
	if err := sv.Verify(got.body, got.header); err == nil {
		t.Error("svix accepts a timestamp 10 minutes old")
	}
	if err := sv.VerifyIgnoringTimestamp(got.body, got.header); err != nil {
		t.Errorf("the signature itself is wrong: %v", err)
	}
}

func TestRotationSendsTwoSignatures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, nil)
	sub := b.add(t, rcv.srv.URL)
	rotated, err := b.store.Rotate(b.ctx, sub.ID, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret == sub.Secret {
		t.Fatal("rotate kept the secret")
	}
	defer b.run(t, webhooks.SenderConfig{})()
	b.publishEvent(t, "rot-1", "compute", "succeeded", "default")
	waitFor(t, "the delivery", func() bool { return len(rcv.all()) > 0 })
	got := rcv.all()[0]
	if n := len(strings.Fields(got.header.Get("webhook-signature"))); n != 2 {
		t.Errorf("%d signatures while rotating, want 2", n)
	}
	for name, secret := range map[string]string{"old": sub.Secret, "new": rotated.Secret} {
		if err := verify(secret, got); err != nil {
			t.Errorf("%s secret: %v", name, err)
		}
	}
}
