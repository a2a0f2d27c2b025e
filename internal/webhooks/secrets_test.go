package webhooks_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/webhooks"
)

// syncBuffer is a log sink safe for the sender's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNoSecretInLogs: neither the secret, the signature nor the URL's
// query reaches a log line or a delivery record's listing.
func TestNoSecretInLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rcv := newReceiver(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	sub := b.add(t, rcv.srv.URL+"/in?token=query-secret-71")
	logs := &syncBuffer{}
	defer b.run(t, webhooks.SenderConfig{Log: zerolog.New(logs).Level(zerolog.DebugLevel)})()
	id := b.publishEvent(t, "quiet-1", "video", "succeeded", "default")
	waitFor(t, "the delivery", func() bool {
		d, err := b.store.Delivery(b.ctx, sub.ID+"."+id)
		return err == nil && d.Status == webhooks.StatusDelivered
	})
	ds, err := b.store.Deliveries(b.ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	sig := rcv.all()[0].header.Get("webhook-signature")
	secretKey := strings.TrimPrefix(sub.Secret, webhooks.SecretPrefix)
	for _, leak := range []string{secretKey, strings.TrimPrefix(sig, "v1,"), "query-secret-71"} {
		if strings.Contains(logs.String(), leak) {
			t.Errorf("logs carry %q:\n%s", leak, logs.String())
		}
		if ds[0].Where != "" && strings.Contains(ds[0].Where, leak) {
			t.Errorf("the delivery's listing carries %q", leak)
		}
	}
	if !strings.Contains(logs.String(), "will retry") {
		t.Errorf("the failed attempt was not logged:\n%s", logs.String())
	}
}

// TestDeliveriesListingHidesNotifyURLQuery: a job's notify.webhook URL is
// kept in its delivery record (it is the destination), but the listing
// that `enqueue webhooks deliveries --json` prints and the console shows
// carries only its scheme, host and path, never its query (a token).
func TestDeliveriesListingHidesNotifyURLQuery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d := webhooks.Delivery{ID: "notify-default.job-q.succeeded", Sub: "notify-default",
		URL:   "https://hooks.example.com/in?token=query-secret-72",
		Where: webhooks.Where("https://hooks.example.com/in?token=query-secret-72"), EventID: "job-q.succeeded",
		Status: webhooks.StatusPending, Created: time.Now().UTC(), Updated: time.Now().UTC()}
	if err := b.store.CreateDelivery(b.ctx, d); err != nil {
		t.Fatal(err)
	}
	ds, err := b.store.Deliveries(b.ctx, false)
	if err != nil || len(ds) != 1 {
		t.Fatalf("deliveries %+v, %v; want the one", ds, err)
	}
	listed, _ := json.Marshal(ds)
	if strings.Contains(string(listed), "query-secret-72") {
		t.Errorf("the listing carries the notify URL's query:\n%s", listed)
	}
	if ds[0].Where != "https://hooks.example.com/in" {
		t.Errorf("where %q, want the URL without its query", ds[0].Where)
	}
}
