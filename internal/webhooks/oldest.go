package webhooks

import (
	"context"
	"sync"
	"time"
)

// oldest tracks when each delivery this worker has seen and not finished
// was published, for the age-of-the-oldest-pending gauge.
type oldest struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

func newOldest() *oldest { return &oldest{seen: map[string]time.Time{}} }

func (o *oldest) add(id string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.seen[id]; !ok {
		o.seen[id] = at
	}
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
	for _, at := range o.seen {
		if first.IsZero() || at.Before(first) {
			first = at
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
