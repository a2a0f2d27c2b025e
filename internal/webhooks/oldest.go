package webhooks

import (
	"context"
	"sync"
	"time"
)

// oldest tracks when each delivery this worker has seen and not finished
// was published, for the age-of-the-oldest-pending gauge. Another worker
// may settle a delivery this one has seen: an entry not seen again for
// forgetAfter (longer than any wait between two sightings) is dropped.
type oldest struct {
	mu   sync.Mutex
	seen map[string]sighting
}

type sighting struct{ published, last time.Time }

const forgetAfter = maxRetryAfter + time.Hour

func newOldest() *oldest { return &oldest{seen: map[string]sighting{}} }

func (o *oldest) add(id string, published, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.seen[id]
	if !ok {
		s.published = published
	}
	s.last = now
	o.seen[id] = s
}

func (o *oldest) remove(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, id)
}

// age is how long the oldest pending delivery has waited (0: none).
func (o *oldest) age(now time.Time) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var first time.Time
	for id, s := range o.seen {
		if now.Sub(s.last) > forgetAfter {
			delete(o.seen, id)
			continue
		}
		if first.IsZero() || s.published.Before(first) {
			first = s.published
		}
	}
	if first.IsZero() {
		return 0
	}
	return now.Sub(first)
}

// report sets m's gauge every few seconds until ctx ends.
func (o *oldest) report(ctx context.Context, m Meter, now func() time.Time) {
	if m == nil {
		return
	}
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.WebhookOldestPending(o.age(now()))
		}
	}
}
