package watchdog_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/watchdog"
)

// TestStuckJobIsReportedOnceAndHandedBack drives the watchdog on a test
// clock: a job within its step's bound is left alone; past Factor times
// the step's deadline it is logged once with its step and age, counted
// and marked; past HandBackFactor times it is handed back once and
// forgotten. A job that moves to another step starts again, one without
// a bound is never stuck, and a settled one is forgotten.
func TestStuckJobIsReportedOnceAndHandedBack(t *testing.T) {
	clock := testenv.NewClock()
	logs := &testenv.SyncBuffer{}
	var mu sync.Mutex
	counts, marks := map[string]int{}, map[string]string{}
	w := watchdog.New(watchdog.Config{
		Factor: 3, HandBackFactor: 10, Now: clock.Now, Log: zerolog.New(logs),
		Counted: func(step string, n int) { mu.Lock(); counts[step] = n; mu.Unlock() },
		Mark:    func(_ context.Context, id, step string, _ time.Time) { mu.Lock(); marks[id] = step; mu.Unlock() },
	})
	ctx := context.Background()
	handedBack := map[string]int{}
	settled := map[string]bool{}
	track := func(id, step string, deadline time.Duration) *watchdog.Job {
		return w.Track(id, "video", step, deadline,
			func() bool { return settled[id] },
			func() { handedBack[id]++ })
	}
	stuck := track("stuck", "received", time.Minute)
	track("waiting", "waiting_quota", 0)
	moving := track("moving", "received", time.Minute)
	done := track("done", "received", time.Minute)

	clock.Advance(2 * time.Minute)
	if got := w.Check(ctx); len(got) != 0 {
		t.Fatalf("within the bound: %+v stuck", got)
	}
	moving.Step("submitted", time.Hour)
	settled["done"] = true
	_ = done
	clock.Advance(2 * time.Minute) // 4 min: past 3× a minute
	got := w.Check(ctx)
	if len(got) != 1 || got[0].ID != "stuck" || got[0].Step != "received" || got[0].Age != 4*time.Minute || got[0].HandedBack {
		t.Fatalf("past the bound: %+v, want only job stuck at received, 4m old, not handed back", got)
	}
	w.Check(ctx)
	if n := strings.Count(logs.String(), watchdog.LogStuck); n != 1 {
		t.Errorf("stuck logged %d times, want once:\n%s", n, logs)
	}
	if counts["received"] != 1 || marks["stuck"] != "received" || len(marks) != 1 {
		t.Errorf("counts %v, marks %v; want received 1 and the job marked", counts, marks)
	}
	stuck.Step("received", time.Minute) // the same step again changes nothing
	clock.Advance(7 * time.Minute)      // 11 min: past 10× a minute
	if got := w.Check(ctx); len(got) != 1 || !got[0].HandedBack {
		t.Fatalf("past the hard bound: %+v, want the job handed back", got)
	}
	if got := w.Check(ctx); len(got) != 0 || handedBack["stuck"] != 1 || len(handedBack) != 1 {
		t.Fatalf("after the hand-back: %+v stuck, hand-backs %v; want none stuck and one hand-back", got, handedBack)
	}
	if counts["received"] != 0 || !strings.Contains(logs.String(), watchdog.LogHandedBack) {
		t.Errorf("counts %v after the hand-back, logs:\n%s", counts, logs)
	}
}
