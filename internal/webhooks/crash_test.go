package webhooks_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// TestWorkerDiesMidDelivery: the worker that posted a delivery loses its
// connection before it can ack; another worker sends it again with the
// same webhook-id, and nothing is lost.
func TestWorkerDiesMidDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	doomed, err := nats.Connect(b.nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	rcv := newReceiver(t, func(_ int, _ http.ResponseWriter) { once.Do(doomed.Close) })
	sub := b.add(t, rcv.srv.URL)

	// The first worker: its connection dies while its POST is answered.
	js, err := jetstream.New(doomed)
	if err != nil {
		t.Fatal(err)
	}
	first := *b
	n := *b.nats
	n.JS = js
	first.nats = &n
	if first.store, err = webhooks.Open(b.ctx, js); err != nil {
		t.Fatal(err)
	}
	stopFirst := first.run(t, webhooks.SenderConfig{})
	id := b.publishEvent(t, "crash-1", "video", "succeeded", "default")
	waitFor(t, "the first POST", func() bool { return len(rcv.all()) >= 1 })
	stopFirst()

	defer b.run(t, webhooks.SenderConfig{})()
	waitFor(t, "the delivery recorded", func() bool {
		d, err := b.store.Delivery(b.ctx, sub.ID+"."+id)
		return err == nil && d.Status == webhooks.StatusDelivered
	})
	got := rcv.all()
	if len(got) < 2 {
		t.Fatalf("receiver got %d POSTs, want the first and the redelivery", len(got))
	}
	for _, r := range got {
		if r.header.Get("webhook-id") != id {
			t.Errorf("webhook-id %q, want %q on every copy", r.header.Get("webhook-id"), id)
		}
	}
}

// TestSubscriptionURLNotOverridden: a delivery message names its
// destination URL only for a job's own notify.webhook; one for a
// subscription that carries a URL anyway (a forged or corrupted message)
// goes to the subscription's own URL, so that no message can have a
// subscription's secret sign a POST to somewhere else.
func TestSubscriptionURLNotOverridden(t *testing.T) {
	t.Parallel()
	b := setup(t)
	own := newReceiver(t, nil)
	other := newReceiver(t, nil)
	sub := b.add(t, own.srv.URL, "image.succeeded")
	defer b.run(t, webhooks.SenderConfig{})()
	body := []byte(`{"specversion":"1.0","id":"forged-1.succeeded","type":"sluice.job.succeeded","source":"x"}`)
	m := webhooks.Message{Delivery: sub.ID + ".forged-1.succeeded", Sub: sub.ID, URL: other.srv.URL + "/steal",
		EventID: "forged-1.succeeded", Event: body}
	data, _ := json.Marshal(m)
	if _, err := b.nats.JS.Publish(b.ctx, contract.DeliverySubjectPrefix+sub.ID, data); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the message settled", func() bool { return len(own.all())+len(other.all()) > 0 })
	if n := len(other.all()); n != 0 {
		t.Errorf("a URL in the message took %d signed POSTs away from the subscription's own", n)
	}
}
