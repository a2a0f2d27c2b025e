// Package order decides which jobs start next when more wait than may
// start: the most urgent priority first, tenants sharing the starts within
// a priority by their weights, with aging so that nothing waits for ever
// (docs/lifecycle.md, "Order of starts"). Allocate is a pure function of
// what waits and what the tenants' settings allow; the NATS reads and
// pulls are the consumer's.
package order

// DefaultTenant is the tenant of a job whose spec names none.
const DefaultTenant = "default"

// DefaultPriority is the priority of a job whose spec names none; 1 is the
// most urgent, 5 the least.
const DefaultPriority = 3

// Policy is what the operators' tenant settings (SLUICE_TENANTS) say about
// the order of starts. It is read live: every answer may change between
// two calls.
type Policy interface {
	// Enabled reports whether fair scheduling is on: SLUICE_TENANTS holds
	// a setting or its marker.
	Enabled() bool
	// Weight is tenant's share of the starts within a priority. Defaults
	// to 1.
	Weight(tenant string) float64
	// MaxTasks is the most jobs of tenant and kind in flight at once across
	// the fleet; 0 means no cap.
	MaxTasks(tenant, kind string) int
	// BudgetHolds reports whether tenant's jobs of kind wait for budget:
	// its budget is spent for this period and kind's jobs are priced, so
	// none of them starts. Jobs a budget cannot hold back start.
	BudgetHolds(tenant, kind string) bool
}

// Static is a Policy of fixed settings. Its zero value, like a nil
// *Static, is never enabled, gives every tenant weight 1 and caps nothing.
type Static struct {
	// On is what Enabled reports.
	On bool
	// Weights by tenant; a tenant not listed, or with a weight of 0 or
	// less, has weight 1.
	Weights map[string]float64
	// Caps by tenant and kind (MaxTasks).
	Caps map[string]map[string]int
	// Spent lists the tenants waiting for budget, for every kind.
	Spent map[string]bool
}

var _ Policy = (*Static)(nil)

// Enabled reports s.On.
func (s *Static) Enabled() bool { return s != nil && s.On }

// Weight returns tenant's weight, 1 unless set above 0.
func (s *Static) Weight(tenant string) float64 {
	if s != nil {
		if w := s.Weights[tenant]; w > 0 {
			return w
		}
	}
	return 1
}

// MaxTasks returns tenant's cap for kind, 0 for none.
func (s *Static) MaxTasks(tenant, kind string) int {
	if s == nil {
		return 0
	}
	return s.Caps[tenant][kind]
}

// BudgetHolds reports whether tenant is listed in s.Spent.
func (s *Static) BudgetHolds(tenant, _ string) bool { return s != nil && s.Spent[tenant] }
