package console_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/console"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// TestWebhooksPage: the page lists the subscriptions by URL host and path
// (never the query or the secret) with their state, and the deliveries
// that failed or are failing with their last answer.
func TestWebhooksPage(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, time.Minute)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	st, err := webhooks.Ensure(ctx, n.JS, webhooks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sub, err := st.Add(ctx, webhooks.Subscription{URL: "https://hooks.example.com/in?token=tok-secret-9", Events: []string{"video.succeeded"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := st.Add(ctx, webhooks.Subscription{URL: "https://gone.example.com/x"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Disable(ctx, gone.ID, "receiver answered 410 Gone"); err != nil {
		t.Fatal(err)
	}
	for i, status := range []string{webhooks.StatusFailed, webhooks.StatusDelivered} {
		id := sub.ID + ".job-" + string(rune('a'+i)) + ".succeeded"
		d := webhooks.Delivery{ID: id, Sub: sub.ID, Where: "https://hooks.example.com/in", EventID: "job.succeeded", Status: status,
			Attempts: []webhooks.Attempt{{At: now, Status: 503, Error: "receiver answered 503 Service Unavailable"}}, Created: now, Updated: now}
		if err := st.CreateDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Config{Client: jc})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/console/webhooks")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /console/webhooks: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{sub.ID, "https://hooks.example.com/in", "video.succeeded", gone.ID, "receiver answered 410 Gone",
		sub.ID + ".job-a.succeeded", "503", `class="on">Webhooks</a>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, leak := range []string{"tok-secret-9", "whsec_", sub.ID + ".job-b.succeeded"} {
		if strings.Contains(page, leak) {
			t.Errorf("the page shows %q", leak)
		}
	}
}
