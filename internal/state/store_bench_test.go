package state_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// BenchmarkCheckpoint compares the two ways of writing a job's next
// checkpoint on an embedded NATS server: Update reads the record and writes
// it back (two round trips), UpdateFrom writes from the record the job
// already holds (one).
func BenchmarkCheckpoint(b *testing.B) {
	n := testenv.StartNATS(b)
	ctx := context.Background()
	kv, err := n.JS.CreateOrUpdateKeyValue(ctx, contract.StateBucketConfig(contract.Options{}))
	if err != nil {
		b.Fatal(err)
	}
	st := state.NewStore(kv, "bench", nil)
	st.Direct(n.Conn)
	step := func(r *state.Record) error { r.Attempts++; return nil }

	b.Run("Update", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := st.Update(ctx, "job-update", step); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("UpdateFrom", func(b *testing.B) {
		b.ReportAllocs()
		rec, err := st.UpdateNew(ctx, "job-update-from", step)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if rec, err = st.UpdateFrom(ctx, rec, step); err != nil {
				b.Fatal(err)
			}
		}
	})
}
