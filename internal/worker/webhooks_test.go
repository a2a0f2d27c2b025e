package worker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	svix "github.com/svix/svix-webhooks/go"

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
