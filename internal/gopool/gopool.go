// Package gopool runs functions on goroutines that are kept for a while
// after their work ends, so that a steady stream of short jobs often
// reuses a goroutine whose stack has already grown instead of growing a
// fresh one for each (runtime.newstack took 11% of the worker's CPU in the
// throughput benchmark, P1, and 9% with the pool: the collector still
// shrinks idle stacks). It never queues: a function that finds no idle
// goroutine gets a new one, so a long-running function never delays
// another.
package gopool

import (
	"cmp"
	"sync/atomic"
	"time"
)

// Pool is an elastic set of goroutines. The zero value is not usable; use
// New.
type Pool struct {
	idle    time.Duration
	maxIdle int64
	work    chan func()
	live    atomic.Int64
	idlers  atomic.Int64
}

// Live is how many goroutines the pool has, busy or idle.
func (p *Pool) Live() int { return int(p.live.Load()) }

// maxIdle bounds the goroutines kept waiting for work: a burst that ran
// thousands of functions at once does not leave thousands of stacks behind.
const maxIdle = 128

// New returns a Pool whose goroutines exit after idle without work
// (default 10s); at most 128 wait at once.
func New(idle time.Duration) *Pool {
	return &Pool{idle: cmp.Or(idle, 10*time.Second), maxIdle: maxIdle, work: make(chan func())}
}

// Go runs f on an idle goroutine of the pool, or on a new one.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		p.live.Add(1)
		go p.loop(f)
	}
}

// loop runs f, then whatever work comes before the goroutine has been idle
// for p.idle.
func (p *Pool) loop(f func()) {
	defer p.live.Add(-1)
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		f()
		f = nil
		if p.idlers.Add(1) > p.maxIdle {
			p.idlers.Add(-1)
			return
		}
		t.Reset(p.idle)
		select {
		case f = <-p.work:
			p.idlers.Add(-1)
		case <-t.C:
			p.idlers.Add(-1)
			return
		}
	}
}
