package worker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// hookReceiver counts the deliveries both reference libraries accept
// with secret, and the others.
type hookReceiver struct {
	mu      sync.Mutex
	secret  string
	ok, bad int
	ids     []string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	sw, _ := standardwebhooks.NewWebhook(h.secret)
	sv, _ := svix.NewWebhook(h.secret)
	if sw.Verify(body, r.Header) != nil || sv.Verify(body, r.Header) != nil {
		h.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	h.ok++
	h.ids = append(h.ids, r.Header.Get("webhook-id"))
}

func (h *hookReceiver) counts() (ok, bad int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ok, h.bad
}

// subscribeWebhook adds, as the test's own user, a subscription to every
// event once a worker has set webhooks up, and returns its receiver.
func subscribeWebhook(t *testing.T, b *bundle) *hookReceiver {
	t.Helper()
	ctx := testenv.Context(t, 30*time.Second)
	st, err := webhooks.Open(ctx, b.nats.JS)
	if err != nil {
		t.Fatal(err)
	}
	h := &hookReceiver{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// The receiver waits for the secret.
	h.mu.Lock()
	defer h.mu.Unlock()
	sub, err := st.Add(ctx, webhooks.Subscription{URL: srv.URL + "/hook"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h.secret = sub.Secret
	return h
}

// waitWebhooks waits until h accepted at least n deliveries, none refused.
func waitWebhooks(t *testing.T, h *hookReceiver, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, bad := h.counts()
		if bad > 0 {
			t.Fatalf("%d webhook deliveries failed the reference libraries' verification", bad)
		}
		if ok >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d webhook deliveries, want at least %d", ok, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestJobNotifyWebhook: a job's own notify.webhook receives its terminal
// event only, signed with its tenant's notify secret; a private
// destination on a production worker is an invalid spec naming the field.
func TestJobNotifyWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, received{header: r.Header.Clone(), body: body})
	}))
	t.Cleanup(srv.Close)
	b.start(t, func(c *config.Config) { c.Webhooks = true })

	spec := videoSpec("notify-1", "a kite")
	spec["tenant"] = "acme"
	spec["notify"] = map[string]any{"webhook": map[string]any{"url": srv.URL + "/done"}}
	b.publish(t, "video", "notify-1", spec)
	if ev := b.await(t, "notify-1", time.Minute); ev.Data.Status != "succeeded" {
		t.Fatalf("job ended %s", ev.Data.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job's webhook got nothing")
		}
		time.Sleep(50 * time.Millisecond)
	}
	ctx := testenv.Context(t, 10*time.Second)
	st, err := webhooks.Open(ctx, b.nats.JS)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := st.NotifySecret(ctx, "acme", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].header.Get("webhook-id") != "notify-1.succeeded" {
		t.Fatalf("deliveries %d, first webhook-id %q; want the terminal event only", len(got), got[0].header.Get("webhook-id"))
	}
	sw, _ := standardwebhooks.NewWebhook(secret.Secret)
	sv, _ := svix.NewWebhook(secret.Secret)
	if err := sw.Verify(got[0].body, got[0].header); err != nil {
		t.Errorf("standard-webhooks: %v", err)
	}
	if err := sv.Verify(got[0].body, got[0].header); err != nil {
		t.Errorf("svix: %v", err)
	}
}

func TestJobNotifyPrivateRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t, func(c *config.Config) { c.Webhooks, c.AllowPrivateURLs = true, false })
	spec := videoSpec("notify-private", "a kite")
	spec["notify"] = map[string]any{"webhook": map[string]any{"url": "https://10.0.0.8/hook"}}
	b.publish(t, "video", "notify-private", spec)
	ev := b.await(t, "notify-private", time.Minute)
	if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != "invalid_spec" ||
		!strings.Contains(ev.Data.Error.Message, "notify.webhook.url") {
		t.Fatalf("event %+v, want failed invalid_spec naming notify.webhook.url", ev.Data)
	}
}

type received struct {
	header http.Header
	body   []byte
}
