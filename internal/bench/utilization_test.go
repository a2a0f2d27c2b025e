package bench

import (
	"math"
	"testing"
	"time"
)

func TestUtilizationOf(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(s ...float64) []taskSpan {
		var out []taskSpan
		for _, x := range s {
			out = append(out, taskSpan{t0.Add(time.Duration(x * float64(time.Second))), 10 * time.Second})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		submits []taskSpan
		quota   int
		want    float64
	}{
		// Two slots, each taken again the moment its 10 s task ends.
		{"full", at(0, 0, 10, 10, 20, 20), 2, 1},
		// One slot left idle for 5 s after each task.
		{"a gap", at(0, 15, 30), 1, 20.0 / 30},
		{"one submit", at(0), 1, 0},
	} {
		if got := utilizationOf(tc.submits, tc.quota); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: utilizationOf = %.4f, want %.4f", tc.name, got, tc.want)
		}
	}
}
