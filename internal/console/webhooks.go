package console

import (
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/webhooks"
)

// webhooksView is the Webhooks page (docs/console.md#webhooks).
type webhooksView struct {
	Subs    []webhookRow
	Failing []failingRow
	Err     string
}

// failingRow is a delivery that failed or is failing, with its last
// attempt.
type failingRow struct {
	webhooks.Delivery
	Attempts int
	Last     webhooks.Attempt
}

// webhookRow is one subscription as the page shows it: no secret, the
// URL without its query.
type webhookRow struct {
	ID, Where, Tenant, Events, State string
}

// maxFailing bounds the failing deliveries the page lists.
const maxFailing = 200

func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var v webhooksView
	st, err := c.cfg.Client.Webhooks(ctx)
	if err == nil {
		var subs []webhooks.Subscription
		if subs, err = st.List(ctx); err == nil {
			v.Subs = webhookRows(subs)
			var ds []webhooks.Delivery
			ds, err = st.Deliveries(ctx, true)
			v.Failing = failingRows(ds)
		}
	}
	if err != nil {
		v.Err = err.Error()
	}
	c.render(w, "webhooks", c.newPage(r, "Webhooks", "webhooks", v))
}

func webhookRows(subs []webhooks.Subscription) []webhookRow {
	rows := make([]webhookRow, 0, len(subs))
	for _, s := range subs {
		row := webhookRow{ID: s.ID, Tenant: s.Tenant, Events: strings.Join(s.Events, ", "), State: "active"}
		switch {
		case s.Notify:
			row.Where, row.State = "jobs' own notify.webhook", "notify secret"
		default:
			row.Where = webhooks.Where(s.URL)
		}
		if s.Disabled != "" {
			row.State = "disabled: " + s.Disabled
		}
		rows = append(rows, row)
	}
	return rows
}

func failingRows(ds []webhooks.Delivery) []failingRow {
	rows := make([]failingRow, 0, min(len(ds), maxFailing))
	for _, d := range ds[:min(len(ds), maxFailing)] {
		row := failingRow{Delivery: d, Attempts: len(d.Attempts)}
		if n := len(d.Attempts); n > 0 {
			row.Last = d.Attempts[n-1]
		}
		rows = append(rows, row)
	}
	return rows
}
