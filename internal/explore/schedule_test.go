package explore

import (
	"fmt"
	"testing"
)

// TestScheduleReplaysFromItsSeed: the same seed makes the same choice at
// each point whatever order the points are met in; other seeds differ.
func TestScheduleReplaysFromItsSeed(t *testing.T) {
	var points [][2]string
	for i := range 200 {
		points = append(points, [2]string{[]string{"submit", "detail", "state-write"}[i%3], fmt.Sprintf("job-%d", i%5)})
	}
	play := func(seed uint64, reverse bool) map[string]Choice {
		s := newSchedule(seed)
		s.crashes = len(points) // no crash budget: the choice alone is compared
		out := map[string]Choice{}
		for i := range points {
			p := points[i]
			if reverse {
				p = points[len(points)-1-i]
			}
			// The n-th occurrence of a class and job is the same point
			// either way; its key is recorded with its number.
			c := s.decide(p[0], p[1], httpChoices)
			out[fmt.Sprintf("%s/%s#%d", p[0], p[1], s.seen[p[0]+"/"+p[1]])] = c
		}
		return out
	}
	a, b := play(7, false), play(7, true)
	faults := 0
	for k, c := range a {
		if b[k] != c {
			t.Errorf("seed 7 chose %s at %s, then %s", c, k, b[k])
		}
		if c != Normal {
			faults++
		}
	}
	if faults == 0 || faults == len(a) {
		t.Errorf("%d of %d points faulted; want some, not all", faults, len(a))
	}
	other := play(8, false)
	same := 0
	for k, c := range a {
		if other[k] == c {
			same++
		}
	}
	if same == len(a) {
		t.Error("seeds 7 and 8 made the same choices everywhere")
	}
}
