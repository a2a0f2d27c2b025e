package order

import (
	"slices"
	"testing"
	"time"
)

type allocateCase struct {
	name string
	r    Round
	want []int
}

var now = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

func testAllocate(t *testing.T, tests []allocateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s Stride
			if got := s.Allocate(tt.r); !slices.Equal(got, tt.want) {
				t.Errorf("Allocate = %v, want %v", got, tt.want)
			}
		})
	}
}

// Priorities, tenants and aging.
func TestAllocateOrder(t *testing.T) {
	t.Parallel()
	testAllocate(t, []allocateCase{
		{
			name: "most urgent priority first",
			r: Round{Free: 4, Now: now, Classes: []Class{
				{Priority: 5, Tenant: "a", Waiting: 100, Head: ago(time.Minute)},
				{Priority: 1, Tenant: "a", Waiting: 3, Head: ago(time.Second)},
			}},
			want: []int{1, 3},
		},
		{
			name: "tenants share a priority one start each",
			r: Round{Free: 4, Now: now, Classes: []Class{
				{Priority: 3, Tenant: "a", Waiting: 100},
				{Priority: 3, Tenant: "b", Waiting: 1},
			}},
			want: []int{3, 1},
		},
		{
			name: "aging promotes an old priority-5 head",
			r: Round{Free: 2, Now: now, Aging: 10 * time.Minute, Classes: []Class{
				{Priority: 5, Tenant: "a", Waiting: 10, Head: ago(45 * time.Minute)},
				{Priority: 3, Tenant: "b", Waiting: 10, Head: ago(time.Minute)},
			}},
			want: []int{2, 0},
		},
		{
			name: "aging off never promotes",
			r: Round{Free: 2, Now: now, Classes: []Class{
				{Priority: 5, Tenant: "a", Waiting: 10, Head: ago(45 * time.Hour)},
				{Priority: 3, Tenant: "b", Waiting: 10, Head: ago(time.Minute)},
			}},
			want: []int{0, 2},
		},
	})
}

// Caps, budgets and what is free.
func TestAllocateLimits(t *testing.T) {
	t.Parallel()
	testAllocate(t, []allocateCase{
		{
			name: "a cap leaves the rest to others",
			r: Round{Free: 5, Now: now, Room: map[string]int{"a": 2}, Classes: []Class{
				{Priority: 1, Tenant: "a", Waiting: 10},
				{Priority: 4, Tenant: "b", Waiting: 10},
			}},
			want: []int{2, 3},
		},
		{
			name: "a tenant at its cap starts nothing",
			r: Round{Free: 3, Now: now, Room: map[string]int{"a": -1}, Classes: []Class{
				{Priority: 1, Tenant: "a", Waiting: 10},
			}},
			want: []int{0},
		},
		{
			name: "budget-waiting tenant is skipped",
			r: Round{Free: 3, Now: now, Spent: map[string]bool{"a": true}, Classes: []Class{
				{Priority: 1, Tenant: "a", Waiting: 10},
				{Priority: 5, Tenant: "b", Waiting: 1},
			}},
			want: []int{0, 1},
		},
		{
			name: "within a tenant the more urgent class first",
			r: Round{Free: 3, Now: now, Classes: []Class{
				{Priority: 4, Tenant: "a", Waiting: 10, Head: ago(time.Hour)},
				{Priority: 2, Tenant: "a", Waiting: 2, Head: ago(time.Second)},
			}},
			want: []int{1, 2},
		},
		{
			name: "nothing free",
			r:    Round{Now: now, Classes: []Class{{Priority: 1, Tenant: "a", Waiting: 1}}},
			want: []int{0},
		},
	})
}

// TestStrideWeights: two backlogged tenants of weights 1 and 3 share 200
// starts 25/75, one start per round, as a worker's rounds charge them.
func TestStrideWeights(t *testing.T) {
	t.Parallel()
	weights := map[string]float64{"a": 1, "b": 3}
	r := Round{Free: 1, Weight: func(t string) float64 { return weights[t] }, Classes: []Class{
		{Priority: 3, Tenant: "a", Waiting: 1000},
		{Priority: 3, Tenant: "b", Waiting: 1000},
	}}
	var s Stride
	starts := map[string]int{}
	for range 200 {
		for i, n := range s.Allocate(r) {
			c := r.Classes[i]
			s.Charge(c.Tenant, weights[c.Tenant], n)
			starts[c.Tenant] += n
		}
	}
	if starts["a"] != 50 || starts["b"] != 150 {
		t.Errorf("starts = %v, want a 50, b 150", starts)
	}
}

// TestStrideNoBankedCredit: a tenant backlogged again after a pause starts
// level with the others, not with the credit of its idle time.
func TestStrideNoBankedCredit(t *testing.T) {
	t.Parallel()
	var s Stride
	both := Round{Free: 1, Classes: []Class{{Priority: 3, Tenant: "a", Waiting: 10}, {Priority: 3, Tenant: "b", Waiting: 10}}}
	onlyA := Round{Free: 1, Classes: []Class{{Priority: 3, Tenant: "a", Waiting: 10}}}
	for range 100 {
		s.Charge("a", 1, s.Allocate(onlyA)[0])
	}
	starts := map[string]int{}
	for range 20 {
		for i, n := range s.Allocate(both) {
			s.Charge(both.Classes[i].Tenant, 1, n)
			starts[both.Classes[i].Tenant] += n
		}
	}
	if starts["a"] != 10 || starts["b"] != 10 {
		t.Errorf("after b's return: starts = %v, want 10 each", starts)
	}
}

func TestStaticNil(t *testing.T) {
	t.Parallel()
	var p *Static
	if p.Enabled() || p.Weight("a") != 1 || p.MaxTasks("a", "video") != 0 || p.BudgetHolds("a", "video") {
		t.Error("a nil Static is not the no-op policy")
	}
	s := &Static{On: true, Weights: map[string]float64{"a": 3, "b": -1}}
	if !s.Enabled() || s.Weight("a") != 3 || s.Weight("b") != 1 {
		t.Error("Static does not report its settings")
	}
}
