package apisim

import (
	"maps"
	"strings"
	"sync"
)

// Counters counts what the simulators saw, for tests and benchmarks. Safe
// for concurrent use; the zero value is ready.
type Counters struct {
	mu sync.Mutex
	m  map[string]int64
}

// Add adds n to the counter named name.
func (c *Counters) Add(name string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]int64)
	}
	c.m[name] += n
}

// Get returns the counter named name (0 if never added to).
func (c *Counters) Get(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}

// Requests returns how many requests to endpoint were answered, whatever
// their status: the sum of its "requests:<endpoint>:<status>" counters.
func (c *Counters) Requests(endpoint string) int64 {
	prefix := "requests:" + endpoint + ":"
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for k, v := range c.m {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

// Snapshot returns a copy of every counter.
func (c *Counters) Snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}
