package apisim

import (
	"container/heap"
	"time"
)

// load is what a simulator runs at once and the requests it answers per
// second, kept by its Counters.
type load struct {
	// running are the tasks (jobs) not ended yet, by planned end; live
	// counts those not cancelled since.
	running endHeap
	live    int
	peak    int
	// perSecond counts answered requests per Unix second and endpoint.
	perSecond map[int64]map[string]int64
}

// runningTask is one task in the simulator's load.
type runningTask struct {
	end   time.Time
	ended bool
}

type endHeap []*runningTask

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i].end.Before(h[j].end) }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(*runningTask)) }
func (h *endHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// start records a task submitted at now that ends (is terminal) at end,
// and returns its handle for cancelled.
func (c *Counters) start(now, end time.Time) *runningTask {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	t := &runningTask{end: end}
	if end.After(now) {
		heap.Push(&c.load.running, t)
		c.load.live++
		c.load.peak = max(c.load.peak, c.load.live)
	} else {
		t.ended = true
	}
	return t
}

// cancelled ends t early.
func (c *Counters) cancelled(t *runningTask) {
	if t == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.ended {
		t.ended = true
		c.load.live--
	}
}

// expire drops the tasks ended by now; call with c.mu held.
func (c *Counters) expire(now time.Time) {
	for len(c.load.running) > 0 && !c.load.running[0].end.After(now) {
		t := heap.Pop(&c.load.running).(*runningTask)
		if !t.ended {
			t.ended = true
			c.load.live--
		}
	}
}

// running returns the tasks (compute jobs) submitted and not yet terminal
// at now.
func (c *Counters) running(now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.expire(now)
	return c.load.live
}

// PeakRunning returns the highest number of tasks (compute jobs) that were
// submitted and not yet terminal at once, as seen at each submit.
func (c *Counters) PeakRunning() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.load.peak
}

// countSecond counts one answered request of endpoint in the second of t;
// call with c.mu held.
func (c *Counters) countSecond(t time.Time, endpoint string) {
	if c.load.perSecond == nil {
		c.load.perSecond = make(map[int64]map[string]int64)
	}
	sec := t.Unix()
	m := c.load.perSecond[sec]
	if m == nil {
		m = make(map[string]int64)
		c.load.perSecond[sec] = m
		// A simulator may serve a dev worker for days: keep an hour.
		for old := range c.load.perSecond {
			if old <= sec-keepSeconds {
				delete(c.load.perSecond, old)
			}
		}
	}
	m[endpoint]++
}

// keepSeconds is how many seconds of request counts a simulator keeps.
const keepSeconds = 3600

// BusiestSecond returns the wall-clock second of the last hour in which
// the simulator answered the most requests, leaving out the endpoints named in except
// (e.g. result downloads), and how many it answered then.
func (c *Counters) BusiestSecond(except ...string) (time.Time, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best int64
	var at int64
	for sec, m := range c.load.perSecond {
		var n int64
		for ep, v := range m {
			skip := false
			for _, x := range except {
				skip = skip || x == ep
			}
			if !skip {
				n += v
			}
		}
		if n > best || n == best && sec < at {
			best, at = n, sec
		}
	}
	return time.Unix(at, 0), best
}
