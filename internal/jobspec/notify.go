package jobspec

import (
	"encoding/json"
	"slices"
	"strings"
)

// Notify is the spec's optional notify section: where the job's own events
// go besides SLUICE_EVENTS (docs/webhooks.md).
type Notify struct {
	// Webhook, when set, receives the job's events as signed HTTP POSTs.
	Webhook *NotifyWebhook `json:"webhook,omitempty"`
}

// NotifyWebhook is a job's own webhook.
type NotifyWebhook struct {
	// URL is an http(s) URL with a host and no credentials; whether it may
	// be plain http or a private address is the worker's policy
	// (webhooks.PolicyOf), checked when the job arrives.
	URL string `json:"url"`
	// Events are NotifyEvents values or statuses; empty means
	// ["terminal"].
	Events []string `json:"events,omitempty"`
}

// NotifyEvents are the values notify.webhook.events may hold besides the
// statuses: "terminal" (succeeded, failed, cancelled; the default) and
// "all".
var NotifyEvents = []string{"terminal", "all", "submitted", "running", "succeeded", "failed", "cancelled"}

func (n *Notify) decode(d *decoder, path string, raw json.RawMessage) bool {
	return d.object(path, raw, map[string]fieldFunc{
		"webhook": func(p string, r json.RawMessage) {
			w := &NotifyWebhook{}
			if d.object(p, r, map[string]fieldFunc{
				"url": func(p string, r json.RawMessage) { d.str(p, r, &w.URL) },
				"events": func(p string, r json.RawMessage) {
					elems, _ := d.array(p, r)
					for i, e := range elems {
						var v string
						if d.str(index(p, i), e, &v) {
							w.Events = append(w.Events, v)
						}
					}
				},
			}) {
				n.Webhook = w
			}
		},
	})
}

func (n *Notify) validate(ps *problems, path string) {
	w := n.Webhook
	if w == nil {
		return
	}
	p := field(path, "webhook")
	switch u := w.URL; {
	case u == "":
		ps.add(field(p, "url"), "required (an https URL)")
	case !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://"):
		ps.add(field(p, "url"), "must be an https URL (http only on a development worker)")
	default:
		if rule := httpURLRule(u); rule != "" {
			ps.add(field(p, "url"), rule)
		}
	}
	for i, e := range w.Events {
		if !slices.Contains(NotifyEvents, e) {
			ps.add(index(field(p, "events"), i), "must be terminal, all or a status ("+strings.Join(NotifyEvents[2:], ", ")+"), got "+quote(e))
		}
	}
}
