package apisim

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Counters counts what the simulators saw, for tests and benchmarks. Safe
// for concurrent use; the zero value is ready.
type Counters struct {
	mu   sync.Mutex
	m    map[string]int64
	load load
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

// countRequests returns next counting each answer it gives as
// "requests:<endpoint>:<status>", once the answer is complete.
func (c *Counters) countRequests(endpoint string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			c.Add("requests:"+endpoint+":"+strconv.Itoa(sw.status), 1)
			c.mu.Lock()
			c.countSecond(time.Now(), endpoint)
			c.mu.Unlock()
		}()
		next(sw, r)
	}
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
