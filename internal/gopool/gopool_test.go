package gopool

import (
	"sync"
	"testing"
	"time"
)

func TestGoRunsEveryFunctionWithoutQueueing(t *testing.T) {
	t.Parallel()
	p := New(time.Minute)
	// A function that blocks does not hold back the others.
	block := make(chan struct{})
	defer close(block)
	var started sync.WaitGroup
	started.Add(1)
	p.Go(func() { started.Done(); <-block })
	started.Wait()
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		p.Go(wg.Done)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("functions queued behind a blocked one")
	}
}

func TestIdleGoroutinesExit(t *testing.T) {
	t.Parallel()
	p := New(10 * time.Millisecond)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		p.Go(wg.Done)
	}
	wg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for p.Live() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still live long after their idle time", p.Live())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestAtMostMaxIdleGoroutinesWait(t *testing.T) {
	t.Parallel()
	p := New(time.Minute)
	p.maxIdle = 3
	block := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		p.Go(func() { <-block; wg.Done() })
	}
	if p.Live() != 10 {
		t.Fatalf("%d goroutines for 10 blocked functions", p.Live())
	}
	close(block)
	wg.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for p.Live() > 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines kept, want at most 3", p.Live())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
