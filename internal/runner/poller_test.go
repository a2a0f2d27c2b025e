package runner

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// fakeTasks answers batch queries from a table, as the media API's batch
// query would, and records every call.
type fakeTasks struct {
	mu      sync.Mutex
	calls   [][]string
	missing map[string]bool
	err     error
}

func (f *fakeTasks) GetTasks(_ context.Context, ids []string) ([]apiclient.Task, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, append([]string(nil), ids...))
	if f.err != nil {
		return nil, f.err
	}
	var out []apiclient.Task
	for _, id := range ids {
		if !f.missing[id] {
			out = append(out, apiclient.Task{Output: apiclient.TaskOutput{TaskID: id, TaskStatus: apiclient.TaskRunning}})
		}
	}
	return out, nil
}

// clockPoller drives a Poller's rounds by hand on a fake clock.
type clockPoller struct {
	*Poller
	now time.Time
}

func newClockPoller(f TaskQuerier) *clockPoller {
	cp := &clockPoller{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cp.Poller = NewPoller(PollerConfig{Client: f, MaxInterval: 5 * time.Second, FirstDelay: time.Second, Now: func() time.Time { return cp.now }})
	return cp
}

// watchLog watches taskID and keeps every update it is given.
func (cp *clockPoller) watchLog(taskID string) (updates func() []PollUpdate, stop func()) {
	var mu sync.Mutex
	var got []PollUpdate
	stop = cp.Watch(taskID, func(u PollUpdate) {
		mu.Lock()
		got = append(got, u)
		mu.Unlock()
	})
	return func() []PollUpdate {
		mu.Lock()
		defer mu.Unlock()
		return append([]PollUpdate(nil), got...)
	}, stop
}

// run advances the clock in 10 ms steps for d, sending every batch a round
// picks.
func (cp *clockPoller) run(d time.Duration) {
	end := cp.now.Add(d)
	for cp.now.Before(end) {
		batches, _ := cp.round(cp.now)
		for _, b := range batches {
			cp.query(context.Background(), b)
		}
		cp.now = cp.now.Add(10 * time.Millisecond)
	}
}

func TestPollerFillsBatches(t *testing.T) {
	t.Parallel()
	for _, n := range []int{100, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			f := &fakeTasks{}
			cp := newClockPoller(f)
			// Tasks arrive spread over 3 s, as submits do.
			for i := range n {
				cp.watchLog(fmt.Sprintf("t-%d", i))
				cp.now = cp.now.Add(3 * time.Second / time.Duration(n))
			}
			cp.run(20 * time.Second) // warm up to the 5 s interval
			f.mu.Lock()
			warm := len(f.calls)
			f.mu.Unlock()
			cp.run(60 * time.Second)

			f.mu.Lock()
			defer f.mu.Unlock()
			polled := 0
			for _, c := range f.calls {
				if len(c) > apiclient.MaxBatch {
					t.Fatalf("batch of %d ids", len(c))
				}
			}
			steady := f.calls[warm:]
			for _, c := range steady {
				polled += len(c)
			}
			perTask := float64(len(steady)) / float64(polled)
			t.Logf("%d tasks: %d requests polled %d task states: %.3f requests per task poll", n, len(steady), polled, perTask)
			if perTask > 0.11 {
				t.Errorf("%.3f requests per task poll, want <= 0.11 (full batches of 10)", perTask)
			}
			// Every task is still polled about every MaxInterval.
			if floor := n * 60 / 5 * 8 / 10; polled < floor {
				t.Errorf("only %d task polls in 60 s for %d tasks (want >= %d)", polled, n, floor)
			}
		})
	}
}

func TestPollerPausesOnRetryAfter(t *testing.T) {
	t.Parallel()
	f := &fakeTasks{err: &apiclient.APIError{Status: 429, RetryAfter: 3 * time.Second}}
	cp := newClockPoller(f)
	cp.watchLog("t-1")
	cp.run(1100 * time.Millisecond) // first poll at 1 s gets the 429
	f.mu.Lock()
	f.err = nil
	calls := len(f.calls)
	f.mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d calls before the pause", calls)
	}
	cp.run(2500 * time.Millisecond)
	f.mu.Lock()
	if len(f.calls) != 1 {
		t.Errorf("polled during the Retry-After pause: %d calls", len(f.calls))
	}
	f.mu.Unlock()
	cp.run(3 * time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) < 2 {
		t.Error("never polled again after the pause")
	}
}

func TestPollerReportsMissingTasks(t *testing.T) {
	t.Parallel()
	f := &fakeTasks{missing: map[string]bool{"gone": true}}
	cp := newClockPoller(f)
	updates, stop := cp.watchLog("gone")
	defer stop()
	cp.run(30 * time.Second)
	got := updates()
	if len(got) == 0 {
		t.Fatal("a task left out of every answer was never reported")
	}
	for _, u := range got {
		if !errors.Is(u.Err, errTaskMissing) {
			t.Errorf("update = %+v", u)
		}
	}
}

func TestPollerNotifiesEveryPollUntilStopped(t *testing.T) {
	t.Parallel()
	f := &fakeTasks{}
	cp := newClockPoller(f)
	updates, stop := cp.watchLog("t-1")
	cp.run(20 * time.Second)
	got := updates()
	// First poll at 1 s, then 2 s, 4 s and 5 s apart: 1, 3, 7, 12, 17.
	if len(got) != 5 {
		t.Errorf("%d updates in 20 s, want 5", len(got))
	}
	for _, u := range got {
		if u.Task == nil || u.Task.Output.TaskID != "t-1" {
			t.Errorf("update = %+v", u)
		}
	}
	stop()
	f.mu.Lock()
	n := len(f.calls)
	f.mu.Unlock()
	cp.run(10 * time.Second)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) != n {
		t.Error("polled a stopped watch")
	}
}

// Two watches of one task (two deliveries of a job on one worker) share
// its polls and are both told every update; stopping one leaves the other
// watching, and the task is polled until the last one stops.
func TestPollerSharesATaskBetweenWatches(t *testing.T) {
	f := &fakeTasks{}
	cp := newClockPoller(f)
	first, stopFirst := cp.watchLog("t1")
	second, stopSecond := cp.watchLog("t1")
	cp.run(1500 * time.Millisecond)
	if len(f.calls) != 1 || len(f.calls[0]) != 1 {
		t.Fatalf("queries %v, want one naming t1 once", f.calls)
	}
	if len(first()) != 1 || len(second()) != 1 {
		t.Fatalf("updates: first %d, second %d; want 1 each", len(first()), len(second()))
	}
	stopFirst()
	cp.run(2500 * time.Millisecond)
	if len(f.calls) != 2 || len(second()) != 2 || len(first()) != 1 {
		t.Fatalf("after the first stopped: %d queries, first %d, second %d updates; want 2, 1, 2", len(f.calls), len(first()), len(second()))
	}
	stopSecond()
	cp.run(10 * time.Second)
	if len(f.calls) != 2 {
		t.Errorf("%d queries after both stopped, want none more", len(f.calls)-2)
	}
}
