package webhooks_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

func TestGoneDisablesSubscription(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusGone) })
	sub := b.add(t, rcv.srv.URL)
	defer b.run(t, webhooks.SenderConfig{})()
	id := b.publishEvent(t, "gone-1", "video", "failed", "default")
	waitFor(t, "the subscription disabled", func() bool {
		s, err := b.store.Get(b.ctx, sub.ID)
		return err == nil && s.Disabled != ""
	})
	waitFor(t, "the delivery failed", func() bool {
		d, err := b.store.Delivery(b.ctx, sub.ID+"."+id)
		return err == nil && d.Status == webhooks.StatusFailed
	})
	b.publishEvent(t, "gone-2", "video", "failed", "default")
	// The next event is not sent: once the dispatcher has stored the
	// second event's deliveries (none), the receiver still has one POST.
	waitFor(t, "the second event dispatched", func() bool {
		ds, _ := b.store.Deliveries(b.ctx, false)
		return len(ds) == 1 && testStoredEvents(t, b) == 2
	})
	if n := len(rcv.all()); n != 1 {
		t.Errorf("a disabled subscription got %d POSTs, want 1", n)
	}
}

func testStoredEvents(t *testing.T, b *testBundle) int {
	c, err := b.nats.JS.Consumer(b.ctx, contract.EventsStream, contract.WebhooksEventsConsumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending > 0 || info.NumPending > 0 {
		return -1
	}
	return int(info.AckFloor.Stream)
}

func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	sub := b.add(t, rcv.srv.URL)
	defer b.run(t, webhooks.SenderConfig{})()
	id := b.publishEvent(t, "ra-1", "speech", "succeeded", "default")
	var d webhooks.Delivery
	waitFor(t, "the delivery", func() bool {
		var err error
		d, err = b.store.Delivery(b.ctx, sub.ID+"."+id)
		return err == nil && d.Status == webhooks.StatusDelivered
	})
	if len(d.Attempts) != 2 || d.Attempts[0].Status != http.StatusServiceUnavailable {
		t.Fatalf("attempts %+v, want a 503 then a success", d.Attempts)
	}
	// The schedule's first wait is 50ms; the receiver asked for 2s, and
	// the second attempt cannot come before it.
	if gap := d.Attempts[1].At.Sub(d.Attempts[0].At); gap < 2*time.Second {
		t.Errorf("second attempt %s after the first, before the receiver's Retry-After of 2s", gap)
	}
	rcvd := rcv.all()
	if rcvd[0].header.Get("webhook-id") != rcvd[1].header.Get("webhook-id") {
		t.Error("the retry has another webhook-id")
	}
}

func TestGivesUpAfterSchedule(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError) })
	sub := b.add(t, rcv.srv.URL)
	defer b.run(t, webhooks.SenderConfig{})()
	id := b.publishEvent(t, "fail-1", "video", "succeeded", "default")
	var d webhooks.Delivery
	waitFor(t, "the delivery failed", func() bool {
		var err error
		d, err = b.store.Delivery(b.ctx, sub.ID+"."+id)
		return err == nil && d.Status == webhooks.StatusFailed
	})
	if len(d.Attempts) != 4 { // at once, then the 3 waits of the test schedule
		t.Errorf("%d attempts, want 4", len(d.Attempts))
	}
	failed, err := b.store.Deliveries(b.ctx, true)
	if err != nil || len(failed) != 1 {
		t.Fatalf("failed deliveries %v, %v; want this one", failed, err)
	}
	// A replay sends it again with the same webhook-id.
	rcv.answer = nil
	if _, err := webhooks.Replay(b.ctx, b.nats.JS, b.store, d.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replay delivered", func() bool {
		d, err = b.store.Delivery(b.ctx, d.ID)
		return err == nil && d.Status == webhooks.StatusDelivered
	})
	all := rcv.all()
	if got := all[len(all)-1].header.Get("webhook-id"); got != id {
		t.Errorf("replay webhook-id %q, want %q", got, id)
	}
}

func TestSlowReceiverDelaysOnlyItself(t *testing.T) {
	t.Parallel()
	b := setup(t)
	release := make(chan struct{})
	slow := newReceiver(t, func(_ int, _ http.ResponseWriter) { <-release })
	t.Cleanup(func() { close(release) })
	fast := newReceiver(t, nil)
	b.add(t, slow.srv.URL)
	b.add(t, fast.srv.URL)
	defer b.run(t, webhooks.SenderConfig{Concurrency: 4, PerEndpoint: 1, Timeout: time.Minute})()
	for i := range 20 {
		b.publishEvent(t, "job-"+string(rune('a'+i)), "video", "succeeded", "default")
	}
	waitFor(t, "the fast receiver's 20 deliveries", func() bool { return len(fast.all()) == 20 })
	if n := len(slow.all()); n != 1 {
		t.Errorf("the slow receiver has %d requests in flight, want 1 (PerEndpoint)", n)
	}
}

func TestHostileReceiversBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var loop *receiver
	loop = newReceiver(t, func(_ int, w http.ResponseWriter) {
		w.Header().Set("Location", loop.srv.URL)
		w.WriteHeader(http.StatusFound)
	})
	big := newReceiver(t, func(_ int, w http.ResponseWriter) {
		_, _ = w.Write([]byte(strings.Repeat("x", 10<<20)))
	})
	hang := newReceiver(t, func(_ int, _ http.ResponseWriter) { time.Sleep(3 * time.Second) })
	subLoop, subBig, subHang := b.add(t, loop.srv.URL), b.add(t, big.srv.URL), b.add(t, hang.srv.URL)
	defer b.run(t, webhooks.SenderConfig{Timeout: 500 * time.Millisecond})()
	id := b.publishEvent(t, "hostile-1", "video", "succeeded", "default")
	for _, c := range []struct {
		sub    webhooks.Subscription
		status string
	}{{subLoop, webhooks.StatusFailed}, {subBig, webhooks.StatusDelivered}, {subHang, webhooks.StatusFailed}} {
		waitFor(t, c.sub.URL+" settled", func() bool {
			d, err := b.store.Delivery(b.ctx, c.sub.ID+"."+id)
			return err == nil && d.Status == c.status
		})
	}
	if n := len(loop.all()); n != 4 {
		t.Errorf("the redirecting receiver got %d POSTs, want 4 (no redirect followed)", n)
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	prod := webhooks.URLPolicy{}
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://hooks.example.com/in?x=1", true},
		{"http://hooks.example.com/in", false},
		{"not a url", false},
		{"hooks.example.com/in", false},
		{"ftp://hooks.example.com/in", false},
		{"https://127.0.0.1/in", false},
		{"https://10.1.2.3/in", false},
		{"https://[::1]/in", false},
		{"https://169.254.169.254/latest", false},
		{"https://localhost:8443/in", false},
		{"https://a.localhost/in", false},
		{"https://user:pw@hooks.example.com/in", false},
		{"https:///in", false},
	} {
		err := prod.CheckURL(c.url)
		if (err == nil) != c.ok {
			t.Errorf("CheckURL(%q) = %v, want ok %v", c.url, err, c.ok)
		}
		if err != nil && !errors.Is(err, webhooks.ErrRefusedURL) {
			t.Errorf("CheckURL(%q) = %v, not ErrRefusedURL", c.url, err)
		}
	}
	dev := webhooks.URLPolicy{AllowPrivate: true, AllowHTTP: true}
	if err := dev.CheckURL("http://127.0.0.1:8080/in"); err != nil {
		t.Errorf("with private URLs and http allowed: %v", err)
	}
}

func TestPrivateDestinationRefusedAtConnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, nil)
	// Stored as if allowed when added; the worker's policy refuses it.
	sub := b.add(t, rcv.srv.URL)
	cfg := webhooks.SenderConfig{}
	stop := b.runWith(t, cfg, webhooks.URLPolicy{AllowHTTP: true})
	defer stop()
	id := b.publishEvent(t, "ssrf-1", "video", "succeeded", "default")
	waitFor(t, "the delivery refused", func() bool {
		d, err := b.store.Delivery(b.ctx, sub.ID+"."+id)
		return err == nil && d.Status == webhooks.StatusFailed
	})
	if n := len(rcv.all()); n != 0 {
		t.Errorf("a loopback receiver got %d POSTs without SLUICE_ALLOW_PRIVATE_URLS", n)
	}
}

// TestCheckURLRefusesOtherIPForms: an IPv4 address written in a form
// netip does not parse (decimal, hex, octal, shortened, a trailing dot)
// is still an address, which a resolver may turn into a loopback or
// private one; it is refused when the subscription is added or the job
// arrives, not only later at connect time. No public name has a last
// label that starts with a digit.
func TestCheckURLRefusesOtherIPForms(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"https://2130706433/in", "https://0x7f000001/in", "https://0177.0.0.1/in",
		"https://127.1/in", "https://127.0.0.1./in", "https://10.0.0.1./in", "https://0/in"} {
		err := webhooks.URLPolicy{}.CheckURL(u)
		if !errors.Is(err, webhooks.ErrRefusedURL) {
			t.Errorf("CheckURL(%q) = %v, want a refusal", u, err)
		}
	}
	for _, u := range []string{"https://hooks.example.com/in", "https://1password.example.com/in", "https://a1.example.xn--p1ai/in"} {
		if err := (webhooks.URLPolicy{}).CheckURL(u); err != nil {
			t.Errorf("CheckURL(%q) = %v, want it allowed", u, err)
		}
	}
}
