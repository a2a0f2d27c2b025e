package jobclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestOverviewCountsJobs: the overview counts each job once, under its
// latest event's status, not each event.
func TestOverviewCountsJobs(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []struct{ kind, id, status string }{
		{"video", "done", "submitted"}, {"video", "done", "running"}, {"video", "done", "succeeded"},
		{"video", "busy", "submitted"}, {"video", "busy", "running"},
		{"video", "bad", "failed"},
		{"speech", "new", "submitted"},
	} {
		m := nats.NewMsg(contract.EventSubject(ev.kind, ev.status))
		m.Header.Set(contract.HeaderMsgID, ev.id+"."+ev.status)
		m.Data = []byte(`{}`)
		if _, err := n.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := jobclient.Dial(context.Background(), jobclient.Config{URL: n.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ov, err := c.Overview(ctx, time.Hour, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]uint64{
		"video":  {"submitted": 0, "running": 1, "succeeded": 1, "failed": 1, "cancelled": 0},
		"speech": {"submitted": 1, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0},
	}
	for _, wc := range ov.Windows {
		if !wc.Exact {
			t.Errorf("%s: counts not exact", wc.Window)
		}
		for kind, byStatus := range want {
			for status, n := range byStatus {
				if got := wc.Counts[kind][status]; got != n {
					t.Errorf("%s: %s %s = %d jobs, want %d", wc.Window, kind, status, got, n)
				}
			}
		}
	}
}
