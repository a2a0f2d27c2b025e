package jobclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
)

// TestListStuck lists the jobs a worker's watchdog marked stuck (through
// the mark the worker writes, runner.MarkStuck) that are still at that
// step: not a job that moved on since, not one that ended, not one never
// marked, and a job without a record is not created by the mark.
func TestListStuck(t *testing.T) {
	t.Parallel()
	n, ctx, kv := stateBucket(t)
	st := state.NewStore(kv, "w1", nil)
	set := func(id, kind string, status state.Status) {
		t.Helper()
		if _, err := st.Update(ctx, id, func(r *state.Record) error { r.Kind, r.Status = kind, status; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	mark := runner.MarkStuck(st, "w1", time.Now)
	since := time.Now().Add(-time.Hour)
	for _, id := range []string{"stuck-old", "stuck-new", "moved", "ended", "fine"} {
		set(id, "video", state.StatusReceived)
	}
	set("stuck-new", "speech", state.StatusSubmitted)
	mark(ctx, "stuck-old", "received", since)
	mark(ctx, "stuck-new", "submitted", since.Add(time.Minute))
	mark(ctx, "moved", "received", since)
	mark(ctx, "ended", "received", since)
	mark(ctx, "no-record", "received", since)
	set("moved", "video", state.StatusSubmitted)
	set("ended", "video", state.StatusFailed)

	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := jc.ListJobs(ctx, jobclient.ListOptions{Stuck: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range list.Jobs {
		ids = append(ids, j.ID)
	}
	if len(ids) != 2 || ids[0] != "stuck-old" || ids[1] != "stuck-new" || list.Jobs[0].Stuck.Step != state.StatusReceived || list.Jobs[0].Stuck.Worker != "w1" {
		t.Fatalf("stuck jobs %v (%+v), want stuck-old at received then stuck-new", ids, list.Jobs)
	}
	if list, err = jc.ListJobs(ctx, jobclient.ListOptions{Stuck: true, Kind: "speech"}); err != nil || len(list.Jobs) != 1 || list.Jobs[0].ID != "stuck-new" {
		t.Fatalf("stuck speech jobs: %+v, %v", list, err)
	}
	if _, _, err := st.Get(context.Background(), "no-record"); err != state.ErrNotFound {
		t.Errorf("marking a job without a record: %v, want no record", err)
	}
}
