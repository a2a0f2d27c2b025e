package apisim

import (
	"maps"
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

// Snapshot returns a copy of every counter.
func (c *Counters) Snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}
