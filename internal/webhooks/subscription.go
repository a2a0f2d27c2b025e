package webhooks

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Subscription is one receiver of events, or a tenant's notify secret
// (Notify set, no URL: the destinations are the jobs' notify.webhook URLs).
type Subscription struct {
	ID string `json:"id"`
	// URL is where deliveries go ("" for a notify secret).
	URL string `json:"url,omitempty"`
	// Tenant limits the events to one tenant's jobs ("": every tenant).
	Tenant string `json:"tenant,omitempty"`
	// Events are KIND.STATUS patterns, either part may be "*" (none: every
	// event).
	Events []string `json:"events,omitempty"`
	// Labels must all be on the job (none: any job).
	Labels map[string]string `json:"labels,omitempty"`
	// Secret signs every delivery; PrevSecret signs too until PrevUntil
	// (a rotation).
	Secret     string    `json:"secret"`
	PrevSecret string    `json:"prev_secret,omitempty"`
	PrevUntil  time.Time `json:"prev_until,omitzero"`
	Notify     bool      `json:"notify,omitempty"`
	// Disabled is set when the receiver answered 410 Gone, with why.
	Disabled string    `json:"disabled,omitempty"`
	Created  time.Time `json:"created"`
	WriteID  string    `json:"write_id,omitempty"`
}

// Secrets are the secrets that sign a delivery at now: the current one and,
// while a rotation lasts, the previous one.
func (s *Subscription) Secrets(now time.Time) []string {
	if s.PrevSecret != "" && now.Before(s.PrevUntil) {
		return []string{s.Secret, s.PrevSecret}
	}
	return []string{s.Secret}
}

// Public is s without its secrets, for listing.
func (s Subscription) Public() Subscription {
	s.Secret, s.PrevSecret, s.WriteID = "", "", ""
	return s
}

// Matches reports whether s wants an event of kind and status for a job
// of tenant with labels.
func (s *Subscription) Matches(kind, status, tenant string, labels map[string]string) bool {
	if s.Notify || s.Disabled != "" {
		return false
	}
	if s.Tenant != "" && s.Tenant != tenant {
		return false
	}
	for k, v := range s.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	if len(s.Events) == 0 {
		return true
	}
	return slices.ContainsFunc(s.Events, func(p string) bool {
		pk, ps, _ := strings.Cut(p, ".")
		return (pk == "*" || pk == kind) && (ps == "*" || ps == status)
	})
}

// Statuses are the event statuses a pattern may name.
var Statuses = []string{"submitted", "running", "succeeded", "failed", "cancelled"}

// CheckPattern refuses an --events pattern that is not KIND.STATUS with
// known parts or "*".
func CheckPattern(p string, kinds []string) error {
	k, s, ok := strings.Cut(p, ".")
	if !ok || (k != "*" && !slices.Contains(kinds, k)) || (s != "*" && !slices.Contains(Statuses, s)) {
		return fmt.Errorf("events: %q is not KIND.STATUS (kinds %s, statuses %s, or *)", p,
			strings.Join(kinds, ", "), strings.Join(Statuses, ", "))
	}
	return nil
}

// NotifyID is the id of tenant's notify secret.
func NotifyID(tenant string) string { return "notify-" + tenant }

// newID returns a new subscription id.
func newID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "wh-" + hex.EncodeToString(b)
}

// Where is u's host and path, without its query (which may carry a token),
// for logs, listings and the console.
func Where(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(not a URL)"
	}
	return p.Scheme + "://" + p.Host + p.Path
}
