package state_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestUpdateNew(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := testenv.Context(t, 10*time.Second)
	inc := func(r *state.Record) error { r.Attempts++; return nil }
	first, err := st.UpdateNew(ctx, "job-1", inc)
	if err != nil || first.Attempts != 1 || first.CreatedAt.IsZero() {
		t.Fatalf("first UpdateNew = %+v, %v", first, err)
	}
	// The record exists now: fn must see it, not a fresh one.
	second, err := st.UpdateNew(ctx, "job-1", inc)
	if err != nil || second.Attempts != 2 || !second.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("second UpdateNew = %+v, %v", second, err)
	}
	rec, _, err := st.Get(ctx, "job-1")
	if err != nil || rec.Attempts != 2 {
		t.Fatalf("stored = %+v, %v", rec, err)
	}
	// fn refusing a fresh record defers to the stored one.
	got, err := st.UpdateNew(ctx, "job-1", func(r *state.Record) error {
		if r.Attempts == 0 {
			return errors.New("fresh record")
		}
		return state.Unchanged
	})
	if err != nil || got.Attempts != 2 {
		t.Fatalf("UpdateNew refusing the fresh record = %+v, %v", got, err)
	}
}

func TestUpdateFrom(t *testing.T) {
	t.Parallel()
	st := newStore(t)
	ctx := testenv.Context(t, 10*time.Second)
	rec, err := st.Update(ctx, "job-1", func(r *state.Record) error {
		r.Status, r.Labels = state.StatusReceived, map[string]string{"a": "1"}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("from the latest record", func(t *testing.T) {
		next, err := st.UpdateFrom(ctx, rec, func(r *state.Record) error {
			r.Status, r.Labels["a"] = state.StatusSubmitting, "2"
			return nil
		})
		if err != nil || next.Status != state.StatusSubmitting {
			t.Fatalf("UpdateFrom = %+v, %v", next, err)
		}
		if rec.Status != state.StatusReceived || rec.Labels["a"] != "1" {
			t.Errorf("UpdateFrom modified the record it started from: %+v", rec)
		}
		rec = next
	})

	t.Run("from a stale record", func(t *testing.T) {
		// Another writer sets the cancel flag after rec was read.
		if _, err := st.RequestCancel(ctx, "job-1"); err != nil {
			t.Fatal(err)
		}
		next, err := st.UpdateFrom(ctx, rec, func(r *state.Record) error {
			r.Status = state.StatusSubmitted
			return nil
		})
		if err != nil || next.Status != state.StatusSubmitted || next.Cancel == nil {
			t.Fatalf("UpdateFrom a stale record = %+v, %v; want the cancel flag kept", next, err)
		}
		stored, _, err := st.Get(ctx, "job-1")
		if err != nil || stored.Cancel == nil || stored.Status != state.StatusSubmitted {
			t.Fatalf("stored = %+v, %v", stored, err)
		}
		rec = next
	})

	t.Run("fn refusing a stale record", func(t *testing.T) {
		stale := rec
		if _, err := st.UpdateFrom(ctx, rec, func(r *state.Record) error { r.Status = state.StatusSucceeded; return nil }); err != nil {
			t.Fatal(err)
		}
		// Judged on the stale record this would write; the stored one is
		// terminal and must win.
		got, err := st.UpdateFrom(ctx, stale, func(r *state.Record) error {
			if r.Status.Terminal() {
				return state.Unchanged
			}
			r.Status = state.StatusRunning
			return nil
		})
		if err != nil || got.Status != state.StatusSucceeded {
			t.Fatalf("UpdateFrom a stale record = %+v, %v; want the terminal record", got, err)
		}
	})
}
