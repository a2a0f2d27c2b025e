package state_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestWatchNamesTheKeysWritten: a watch wakes on a write of one of its
// keys and names it, not the keys left alone nor the ones it does not
// watch, and Take forgets what it returned.
func TestWatchNamesTheKeysWritten(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := testenv.Context(t, 20*time.Second)
	for _, id := range []string{"p--a", "p--b", "other"} {
		if _, err := st.Update(ctx, id, func(r *state.Record) error { r.Status = state.StatusReceived; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	c, err := st.Watch(ctx, []string{"p--a", "p--b"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Take(); len(got) != 0 {
		t.Fatalf("a fresh watch reports %v (it watches updates only)", got)
	}
	for _, id := range []string{"other", "p--b"} {
		if _, err := st.Update(ctx, id, func(r *state.Record) error { r.Status = state.StatusRunning; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-c.C:
	case <-ctx.Done():
		t.Fatal("no wake for a watched key's write")
	}
	if got := c.Take(); len(got) != 1 || !got["p--b"] {
		t.Errorf("Take = %v, want p--b alone", got)
	}
	if again := c.Take(); len(again) != 0 || again == nil {
		t.Errorf("a second Take = %v, want empty", again)
	}
}
