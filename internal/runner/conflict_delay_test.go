package runner

import (
	"testing"
	"time"
)

// TestConflictDelaysSpreadFromTheFirst: the jobs one over-commit gets
// refused come back spread out from their first conflict on, never all
// at the same instant, at least a second later and never more than 15 s.
func TestConflictDelaysSpreadFromTheFirst(t *testing.T) {
	t.Parallel()
	for waits := range 8 {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := conflictDelay(waits)
			if d < time.Second || d > 15*time.Second {
				t.Fatalf("delay %s after %d conflicts, want 1 s to 15 s", d, waits)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("50 jobs refused after %d earlier conflicts all come back after %s: not jittered", waits, anyKey(seen))
		}
	}
}

func anyKey(m map[time.Duration]bool) time.Duration {
	for d := range m {
		return d
	}
	return 0
}
