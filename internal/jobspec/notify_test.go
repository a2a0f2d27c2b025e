package jobspec

import (
	"errors"
	"strings"
	"testing"
)

func TestNotifyWebhook(t *testing.T) {
	t.Parallel()
	base := readExample(t, "text-to-video")
	valid := []struct {
		name   string
		notify any
		events []string
	}{
		{"default events", map[string]any{"webhook": map[string]any{"url": "https://hooks.example.com/in"}}, nil},
		{"all", map[string]any{"webhook": map[string]any{"url": "https://hooks.example.com/in", "events": []string{"all"}}}, []string{"all"}},
		{"statuses", map[string]any{"webhook": map[string]any{"url": "https://hooks.example.com/in", "events": []string{"running", "failed"}}}, []string{"running", "failed"}},
	}
	for _, c := range valid {
		t.Run(c.name, func(t *testing.T) {
			s, err := Decode([]byte(mutate(string(base), set("notify", c.notify))), KindVideo)
			if err != nil {
				t.Fatal(err)
			}
			if s.Notify == nil || s.Notify.Webhook == nil || s.Notify.Webhook.URL != "https://hooks.example.com/in" {
				t.Fatalf("notify %+v", s.Notify)
			}
			if strings.Join(s.Notify.Webhook.Events, ",") != strings.Join(c.events, ",") {
				t.Errorf("events %v, want %v", s.Notify.Webhook.Events, c.events)
			}
		})
	}
	invalid := []struct {
		name   string
		notify any
		path   string
		rule   string
	}{
		{"no url", map[string]any{"webhook": map[string]any{}}, "notify.webhook.url", "required"},
		{"not a URL", map[string]any{"webhook": map[string]any{"url": "hooks"}}, "notify.webhook.url", "http"},
		{"ftp", map[string]any{"webhook": map[string]any{"url": "ftp://h.example.com/"}}, "notify.webhook.url", "http"},
		{"credentials", map[string]any{"webhook": map[string]any{"url": "https://u:p@h.example.com/"}}, "notify.webhook.url", "credentials"},
		{"unknown event", map[string]any{"webhook": map[string]any{"url": "https://h.example.com/", "events": []string{"done"}}}, "notify.webhook.events[0]", "terminal"},
		{"unknown field", map[string]any{"webhook": map[string]any{"url": "https://h.example.com/", "secret": "x"}}, "notify.webhook.secret", "unknown"},
		{"no webhook", map[string]any{"email": "a@b"}, "notify.email", "unknown"},
	}
	for _, c := range invalid {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(mutate(string(base), set("notify", c.notify))), KindVideo)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode = %v, want *Error", err)
			}
			for _, p := range e.Problems {
				if p.Path == c.path && strings.Contains(p.Rule, c.rule) {
					return
				}
			}
			t.Errorf("problems %v, want %s: ...%s...", e.Problems, c.path, c.rule)
		})
	}
}
