package runner

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/gopool"
	"github.com/sluice-dev/sluice/internal/state"
)

// A media poll that brings a waiting job no news (its task still pending,
// or running as its record says) is counted where the poller reads it: no
// goroutine starts for it, which at 100,000 waiting jobs is 20,000
// hand-offs a second. Everything a waiter acts on is news.
func TestMediaPollNews(t *testing.T) {
	t.Parallel()
	task := func(s apiclient.TaskStatus) *apiclient.Task {
		return &apiclient.Task{Output: apiclient.TaskOutput{TaskID: "t1", TaskStatus: s}}
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	closed := make(chan struct{})
	close(closed)
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		status state.Status
		cancel <-chan struct{}
		rec    *state.CancelRequest
		u      PollUpdate
		want   bool
	}{
		{"still pending", context.Background(), state.StatusSubmitted, nil, nil, PollUpdate{Task: task(apiclient.TaskPending)}, false},
		{"still running", context.Background(), state.StatusRunning, nil, nil, PollUpdate{Task: task(apiclient.TaskRunning)}, false},
		{"running, first seen", context.Background(), state.StatusSubmitted, nil, nil, PollUpdate{Task: task(apiclient.TaskRunning)}, true},
		{"terminal", context.Background(), state.StatusRunning, nil, nil, PollUpdate{Task: task(apiclient.TaskSucceeded)}, true},
		{"an error", context.Background(), state.StatusRunning, nil, nil, PollUpdate{Err: errTaskMissing}, true},
		{"a cancel notice", context.Background(), state.StatusRunning, closed, nil, PollUpdate{Task: task(apiclient.TaskRunning)}, true},
		{"a cancel in the record", context.Background(), state.StatusRunning, nil, &state.CancelRequest{}, PollUpdate{Task: task(apiclient.TaskRunning)}, true},
		{"the job's context ended", stopped, state.StatusRunning, nil, nil, PollUpdate{Task: task(apiclient.TaskRunning)}, true},
	} {
		j := &job{cancel: tc.cancel, rec: &state.Record{Status: tc.status, Cancel: tc.rec}}
		if got := mediaPollNews(tc.ctx, j, tc.u); got != tc.want {
			t.Errorf("%s: mediaPollNews = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A poll without news is counted for the wait's span and queues nothing;
// one with news is queued for the waiter's goroutine as before.
func TestQuietPollQueuesNothing(t *testing.T) {
	t.Parallel()
	r := &Runner{cfg: Config{Pool: gopool.New(time.Minute)}}
	w := &waiter{r: r, ctx: context.Background(), j: &job{rec: &state.Record{Status: state.StatusRunning}}}
	running := &apiclient.Task{Output: apiclient.TaskOutput{TaskID: "t1", TaskStatus: apiclient.TaskRunning}}
	for range 3 {
		w.onUpdate(PollUpdate{Task: running})
	}
	w.mu.Lock()
	busy, events, polls := w.busy, w.events, w.polls
	w.mu.Unlock()
	if busy || events != 0 || polls != 3 {
		t.Fatalf("after 3 quiet polls: busy %v, events %b, polls %d; want idle, none queued, 3 counted", busy, events, polls)
	}
	// A poll with news is queued for the waiter's goroutine (busy here,
	// so that none starts in this test).
	w.busy = true
	w.onUpdate(PollUpdate{Err: errors.New("boom")})
	if w.events != evUpdate || w.update.Err == nil {
		t.Fatalf("a poll with news was not queued: events %b, update %+v", w.events, w.update)
	}
}

// A poll reads the job's record (mediaPollNews) only while no goroutine
// handles the job's events, since that goroutine writes it (the "running"
// checkpoint replaces j.rec): under -race, a read outside that hand-off
// fails this test. Polls that come while the goroutine runs are queued.
func TestQuietPollReadsRecordOnlyWhenIdle(t *testing.T) {
	t.Parallel()
	r := &Runner{cfg: Config{Pool: gopool.New(time.Minute)}}
	j := &job{rec: &state.Record{Status: state.StatusSubmitted}}
	w := &waiter{r: r, ctx: context.Background(), j: j, busy: true}
	running := &apiclient.Task{Output: apiclient.TaskOutput{TaskID: "t1", TaskStatus: apiclient.TaskRunning}}
	started, polled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(polled)
		close(started)
		for range 1000 {
			w.onUpdate(PollUpdate{Task: running})
		}
	}()
	// The waiter's goroutine: writes the record (the "running"
	// checkpoint, many times to overlap the polls), then takes the polls
	// queued meanwhile until none is left and it would exit.
	<-started
	for range 1000 {
		j.rec = &state.Record{Status: state.StatusRunning}
	}
	for {
		if _, _, ok := w.next(); !ok {
			break
		}
	}
	<-polled
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy || w.events != 0 {
		t.Fatalf("quiet polls after the checkpoint were queued: busy %v, events %b", w.busy, w.events)
	}
}
