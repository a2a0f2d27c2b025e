package jobclient

import (
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/internal/state"
)

func TestWaiterNeverMovesBackwards(t *testing.T) {
	t.Parallel()
	var moves []string
	w := newWaiter([]Target{{ID: "a", Kind: "video"}, {ID: "b", Kind: "video"}, {ID: "a", Kind: "video"}},
		func(j Job, c Counts) { moves = append(moves, j.ID+":"+j.Status) })
	if w.counts.Total != 2 || w.counts.Queued != 2 {
		t.Fatalf("counts %+v", w.counts)
	}
	steps := []Job{
		{ID: "a", Status: "running"},
		{ID: "a", Status: "submitted"},  // older news: ignored
		{ID: "x", Status: "succeeded"},  // not ours
		{ID: "a", Status: "collecting"}, // same phase: no progress call
		{ID: "b", Status: "received"},   // still queued
		{ID: "a", Status: "succeeded", Artifacts: []state.Artifact{{URL: "s3://b/k"}}},
		{ID: "a", Status: "failed"}, // after the end: ignored
		{ID: "b", Status: "cancelled"},
	}
	for _, j := range steps {
		w.update(j)
	}
	if got := w.counts; got.Done() != 2 || got.Succeeded != 1 || got.Cancelled != 1 || got.Queued+got.Submitted+got.Running != 0 {
		t.Errorf("counts %+v", got)
	}
	want := "[a:running a:succeeded b:cancelled]"
	if got := fmt.Sprint(moves); got != want {
		t.Errorf("progress %s, want %s", got, want)
	}
	r := w.result()
	if r.Jobs[0].ID != "a" || r.Jobs[0].Status != "succeeded" || r.Jobs[0].Kind != "video" || len(r.Jobs[0].Artifacts) != 1 || !w.finished() {
		t.Errorf("result %+v", r.Jobs)
	}
}

func TestEventFilters(t *testing.T) {
	t.Parallel()
	got := eventFilters([]Target{{ID: "a", Kind: "video"}, {ID: "b", Kind: "speech"}, {ID: "c", Kind: "video"}})
	if len(got) != 2 || got[0] != "sluice.events.video.>" || got[1] != "sluice.events.speech.>" {
		t.Errorf("filters %v", got)
	}
	if got := eventFilters([]Target{{ID: "a"}}); len(got) != 1 || got[0] != "sluice.events.>" {
		t.Errorf("filters for an unknown kind %v", got)
	}
}
