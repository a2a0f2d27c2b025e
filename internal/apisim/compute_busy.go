package apisim

import (
	"net/http"
	"sync"
)

// busyAnswers counts, per endpoint, the requests still to be answered
// busy.
type busyAnswers struct {
	mu sync.Mutex
	n  map[string]int
}

// AnswerBusy makes the next n requests to endpoint (an Endpoint* name)
// answer HTTP 200 with the platform's internal-error envelope
// (ComputeCodePlatformInternal, platform-evidence.md section 4) before the
// handler runs: nothing happens upstream. It is how the platform answers
// when it is busy, and is neither "not found" nor a refusal.
func (c *Compute) AnswerBusy(endpoint string, n int) {
	c.busy.mu.Lock()
	defer c.busy.mu.Unlock()
	if c.busy.n == nil {
		c.busy.n = make(map[string]int)
	}
	c.busy.n[endpoint] = n
}

// busyFirst answers busy while AnswerBusy has requests left for endpoint.
func (c *Compute) busyFirst(endpoint string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.busy.mu.Lock()
		busy := c.busy.n[endpoint] > 0
		if busy {
			c.busy.n[endpoint]--
		}
		c.busy.mu.Unlock()
		if busy {
			// The platform goes on while it answers busy: its instances
			// move along as any answer would move them.
			if c.ctr != nil {
				c.ctr.mu.Lock()
				c.settleInstances(c.cfg.Now())
				c.ctr.mu.Unlock()
			}
			writeEnvelopeError(w, http.StatusOK, ComputeCodePlatformInternal, "internal error, please try again later")
			return
		}
		next(w, r)
	}
}
