package order

import (
	"math"
	"time"
)

// Class is one class queue of a kind as a round of pulls sees it.
type Class struct {
	Priority int
	Tenant   string
	// Waiting is how many of its jobs may be pulled now.
	Waiting int
	// Head is when its oldest job was published (zero: unknown, no aging).
	Head time.Time
}

// Round is what one round of pulls of a kind knows.
type Round struct {
	Classes []Class
	// Weight is each tenant's weight (Policy.Weight); nil gives 1.
	Weight func(tenant string) float64
	// Room is how many more jobs each capped tenant may start (its cap
	// less its jobs in flight, 0 or less: none); a tenant not listed has
	// no cap.
	Room map[string]int
	// Spent are the tenants waiting for budget: none of theirs starts.
	Spent map[string]bool
	// Aging makes a job one priority level more urgent per Aging waited;
	// 0 never.
	Aging time.Duration
	Now   time.Time
	// Free is how many jobs may start in all.
	Free int
}

// Stride holds a kind's weighted fair share between tenants (stride
// scheduling): each start adds 1/weight to its tenant's pass, and the
// backlogged tenant with the lowest pass starts next. A tenant that
// becomes backlogged again starts at the lowest pass of those that were,
// so time without work banks no credit. The zero value is ready.
type Stride struct {
	pass       map[string]float64
	backlogged map[string]bool
}

// Effective is the priority a class's head counts with: its priority less
// one level per aging waited, with no lower bound, so that nothing waits
// for ever.
func Effective(priority int, head, now time.Time, aging time.Duration) int {
	if aging <= 0 || head.IsZero() || !now.After(head) {
		return priority
	}
	return priority - int(now.Sub(head)/aging)
}

// Allocate returns how many jobs each of r.Classes may start now, at most
// r.Free in all: the most urgent effective priority first; within it, the
// tenant of lowest pass, one start at a time; within a tenant, the most
// urgent class, then the oldest head. Tenants waiting for budget or
// without room are skipped. It charges nothing: the caller charges the
// starts it makes with Charge.
func (s *Stride) Allocate(r Round) []int {
	takes := make([]int, len(r.Classes))
	left := make([]int, len(r.Classes))
	eff := make([]int, len(r.Classes))
	room := make(map[string]int, len(r.Room))
	for t, n := range r.Room {
		room[t] = n
	}
	for i, c := range r.Classes {
		if c.Waiting > 0 && !r.Spent[c.Tenant] {
			left[i] = c.Waiting
		}
		eff[i] = Effective(c.Priority, c.Head, r.Now, r.Aging)
	}
	pass := s.rejoin(r, left)
	for range r.Free {
		i := pick(r.Classes, left, eff, room, pass)
		if i < 0 {
			break
		}
		t := r.Classes[i].Tenant
		takes[i]++
		left[i]--
		if n, capped := room[t]; capped {
			room[t] = n - 1
		}
		pass[t] += 1 / weightOf(r.Weight, t)
	}
	return takes
}

// pick returns the class that starts next, -1 for none.
func pick(classes []Class, left, eff []int, room map[string]int, pass map[string]float64) int {
	best := -1
	for i, c := range classes {
		if left[i] == 0 {
			continue
		}
		if n, capped := room[c.Tenant]; capped && n <= 0 {
			continue
		}
		if best < 0 || before(classes, eff, pass, i, best) {
			best = i
		}
	}
	return best
}

// before reports whether class i starts before class j.
func before(classes []Class, eff []int, pass map[string]float64, i, j int) bool {
	a, b := classes[i], classes[j]
	switch {
	case eff[i] != eff[j]:
		return eff[i] < eff[j]
	case a.Tenant != b.Tenant && pass[a.Tenant] != pass[b.Tenant]:
		return pass[a.Tenant] < pass[b.Tenant]
	case a.Tenant != b.Tenant:
		return a.Tenant < b.Tenant
	case a.Priority != b.Priority:
		return a.Priority < b.Priority
	}
	return a.Head.Before(b.Head)
}

// rejoin notes which tenants are backlogged this round (some class with
// jobs that may start), moves those that were not up to the lowest pass
// of those that were, and returns a copy of the passes for the round.
func (s *Stride) rejoin(r Round, left []int) map[string]float64 {
	if s.pass == nil {
		s.pass = make(map[string]float64)
	}
	now := make(map[string]bool)
	for i, c := range r.Classes {
		if left[i] > 0 {
			now[c.Tenant] = true
		}
	}
	floor, found := math.Inf(1), false
	for t := range now {
		if s.backlogged[t] {
			floor, found = math.Min(floor, s.pass[t]), true
		}
	}
	if !found {
		floor = 0
		for t := range now {
			if p, ok := s.pass[t]; ok && (!found || p < floor) {
				floor, found = p, true
			}
		}
	}
	for t := range now {
		if !s.backlogged[t] {
			s.pass[t] = math.Max(s.pass[t], floor)
		}
	}
	s.backlogged = now
	pass := make(map[string]float64, len(s.pass))
	for t, p := range s.pass {
		pass[t] = p
	}
	return pass
}

// Charge counts n starts of tenant, of weight w (0 or less: 1).
func (s *Stride) Charge(tenant string, w float64, n int) {
	if s.pass == nil {
		s.pass = make(map[string]float64)
	}
	if w <= 0 {
		w = 1
	}
	s.pass[tenant] += float64(n) / w
}

func weightOf(weight func(string) float64, tenant string) float64 {
	if weight == nil {
		return 1
	}
	if w := weight(tenant); w > 0 {
		return w
	}
	return 1
}
