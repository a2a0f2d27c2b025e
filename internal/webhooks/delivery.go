package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/kvcas"
)

// Statuses of a delivery record.
const (
	StatusPending   = "pending"
	StatusDelivered = "delivered"
	StatusFailed    = "failed"
)

// Delivery is the record of one event sent to one destination, kept in
// SLUICE_WEBHOOKS under "dlv.<id>".
type Delivery struct {
	// ID is "<subscription id>.<event id>".
	ID  string `json:"id"`
	Sub string `json:"sub"`
	// URL is the destination of a job's notify.webhook ("" for a
	// subscription's, which is the subscription's URL).
	URL      string          `json:"url,omitempty"`
	Where    string          `json:"where"`
	EventID  string          `json:"event_id"`
	Subject  string          `json:"subject"`
	Status   string          `json:"status"`
	Attempts []Attempt       `json:"attempts"`
	Event    json.RawMessage `json:"event"`
	Created  time.Time       `json:"created"`
	Updated  time.Time       `json:"updated"`
	// Replays counts the replays asked for; each publishes the delivery
	// again.
	Replays int    `json:"replays,omitempty"`
	WriteID string `json:"write_id,omitempty"`
}

// Attempt is one POST of a delivery.
type Attempt struct {
	At time.Time `json:"at"`
	// Status is the receiver's HTTP status (0: no answer).
	Status int `json:"status"`
	// Error says why the attempt failed ("" on success).
	Error  string `json:"error,omitempty"`
	Millis int64  `json:"ms"`
}

// Message is the body of a delivery message on DeliveriesStream.
type Message struct {
	Delivery string          `json:"delivery"`
	Sub      string          `json:"sub"`
	URL      string          `json:"url,omitempty"`
	EventID  string          `json:"event_id"`
	Event    json.RawMessage `json:"event"`
}

// deliveryID is the id of the delivery of event to subscription sub.
func deliveryID(sub, eventID string) string { return sub + "." + eventID }

// Delivery returns the delivery record id.
func (s *Store) Delivery(ctx context.Context, id string) (Delivery, error) {
	e, err := s.recs.Get(ctx, deliveryPrefix+id)
	if err != nil {
		return Delivery{}, fmt.Errorf("delivery %s: %w", id, ErrNotFound)
	}
	var d Delivery
	return d, json.Unmarshal(e.Value(), &d)
}

// CreateDelivery stores d unless a record of its id exists (a redelivered
// event), which is left as it is.
func (s *Store) CreateDelivery(ctx context.Context, d Delivery) error {
	_, err := s.dlvs.Update(ctx, deliveryPrefix+d.ID, nil, func(_ Delivery, found bool) (Delivery, error) {
		if found {
			return d, kvcas.Unchanged
		}
		return d, nil
	})
	return err
}

// UpdateDelivery applies change to the record id.
func (s *Store) UpdateDelivery(ctx context.Context, id string, change func(*Delivery)) (Delivery, error) {
	e, err := s.dlvs.Update(ctx, deliveryPrefix+id, nil, func(cur Delivery, found bool) (Delivery, error) {
		if !found {
			return cur, fmt.Errorf("delivery %s: %w", id, ErrNotFound)
		}
		change(&cur)
		return cur, nil
	})
	return e.Value, err
}

// Deliveries lists the delivery records, newest first; failedOnly keeps
// those that failed for good or have failed attempts and are still pending.
func (s *Store) Deliveries(ctx context.Context, failedOnly bool) ([]Delivery, error) {
	var out []Delivery
	err := s.each(ctx, s.recs, deliveryPrefix, func(v []byte) error {
		var d Delivery
		if err := json.Unmarshal(v, &d); err != nil {
			return err
		}
		if !failedOnly || d.Failing() {
			// A listing shows Where: a notify URL's query may carry a
			// token (Replay reads the record itself).
			d.Event, d.URL = nil, ""
			out = append(out, d)
		}
		return nil
	})
	slices.SortFunc(out, func(a, b Delivery) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, err
}

// Failing reports whether d failed for good or is pending after failed
// attempts.
func (d *Delivery) Failing() bool {
	return d.Status == StatusFailed || (d.Status == StatusPending && len(d.Attempts) > 0)
}
