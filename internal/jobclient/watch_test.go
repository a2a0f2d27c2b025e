package jobclient_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// Watch with After resumes after a position: the events after it, oldest
// first, each with its sequence; a position past the end counts as the
// end; with Since, the replay goes back no further than Since.
func TestWatchAfter(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := events.NewPublisher(n.JS)
	publish := func(id string) {
		t.Helper()
		if err := pub.Publish(ctx, events.FromRecord(&state.Record{JobID: id, Kind: "video"}, state.StatusRunning, time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	position := func() uint64 {
		t.Helper()
		seq, err := jc.EventsPosition(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	// first watches through jc with o and returns the first event; with fresh set, it
	// publishes a new one (job fresh-N) every 100ms while it waits, for a
	// watch that sends only new events.
	first := func(jc *jobclient.Client, o jobclient.WatchOptions, fresh string) jobclient.WatchedEvent {
		t.Helper()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		got, ended := make(chan jobclient.WatchedEvent, 1), make(chan error, 1)
		go func() {
			err := jc.Watch(wctx, o, func(we jobclient.WatchedEvent) error {
				got <- we
				cancel()
				return nil
			})
			if err != nil {
				ended <- err
			}
		}()
		for i := 0; ; i++ {
			select {
			case we := <-got:
				return we
			case err := <-ended:
				t.Fatalf("watch %+v: %v", o, err)
			case <-ctx.Done():
				t.Fatalf("watch %+v: no event", o)
			case <-time.After(100 * time.Millisecond):
				if fresh != "" {
					publish(fmt.Sprintf("%s-%d", fresh, i))
				}
			}
		}
	}

	publish("a1")
	mark := position()
	publish("a2")
	publish("a3")
	we := first(jc, jobclient.WatchOptions{After: mark}, "")
	if we.Event.Data.JobID != "a2" || we.Seq != mark+1 {
		t.Errorf("after %d: first %s at %d, want a2 at %d", mark, we.Event.Data.JobID, we.Seq, mark+1)
	}
	we = first(jc, jobclient.WatchOptions{After: we.Seq, Since: time.Hour}, "")
	if we.Event.Data.JobID != "a3" {
		t.Errorf("after a2: first %s, want a3", we.Event.Data.JobID)
	}

	// Past the end: only new events, and they do come.
	we = first(jc, jobclient.WatchOptions{After: 1 << 40}, "new")
	if !strings.HasPrefix(we.Event.Data.JobID, "new-") {
		t.Errorf("after a position past the end: first %s", we.Event.Data.JobID)
	}

	// Since bounds the replay: b1 was stored before the moment between the
	// two publishes, b2 after it. A client whose clock reads an hour past
	// that moment, watching the last hour, starts at b2 whatever the
	// machine's speed; the real clock's last hour holds both.
	mark = position()
	publish("b1")
	time.Sleep(10 * time.Millisecond)
	between := time.Now()
	time.Sleep(10 * time.Millisecond)
	publish("b2")
	late, err := jobclient.New(n.Conn, func() time.Time { return between.Add(time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	if we := first(late, jobclient.WatchOptions{After: mark, Since: time.Hour}, ""); we.Event.Data.JobID != "b2" {
		t.Errorf("after %d, from between b1 and b2: first %s, want b2", mark, we.Event.Data.JobID)
	}
	if we := first(jc, jobclient.WatchOptions{After: mark, Since: time.Hour}, ""); we.Event.Data.JobID != "b1" {
		t.Errorf("after %d within 1h: first %s, want b1", mark, we.Event.Data.JobID)
	}
}
