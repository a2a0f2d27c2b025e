package tenants

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

// Kinds are the job kinds a task cap may name.
var Kinds = []string{"video", "speech", "compute", "container"}

// Period is how long a budget lasts: a UTC day, an ISO week (Monday to
// Sunday) or a calendar month.
type Period string

// The periods of a budget.
const (
	PerDay   Period = "day"
	PerWeek  Period = "week"
	PerMonth Period = "month"
)

// OnBudget says what happens to a job that would go over its tenant's
// budget.
type OnBudget string

// What a job over budget does: wait for the next period (the default), or
// fail with budget_exhausted.
const (
	OnBudgetWait OnBudget = "wait"
	OnBudgetFail OnBudget = "fail"
)

// Settings are one tenant's settings, the value of key tenant.<id>.
type Settings struct {
	// Weight is the tenant's share of the starts within a priority.
	// Defaults to 1 (0 means unset).
	Weight float64 `json:"weight,omitempty"`
	// MaxTasks caps the tenant's tasks upstream at once, by kind; an
	// absent kind or 0 is no cap.
	MaxTasks map[string]int `json:"max_tasks,omitempty"`
	// Budget is the credits the tenant may spend per period; nil is no
	// budget.
	Budget *Budget `json:"budget,omitempty"`
	// OnBudget is wait or fail. Defaults to wait.
	OnBudget OnBudget `json:"on_budget,omitempty"`
	// Bound: the tenant's jobs are accepted only from its tenant subjects
	// (sluice.jobs.<kind>.t.<tenant>), where NATS permissions decide who
	// may publish, or the HTTP API with one of its keys; a job naming it
	// anywhere else fails tenant_refused (docs/tenants.md).
	Bound bool `json:"bound,omitempty"`
	// MaxPriority is the most urgent priority the tenant's jobs may ask
	// (1 is the most urgent): a job more urgent fails tenant_refused. 0
	// is no limit.
	MaxPriority int `json:"max_priority,omitempty"`
	// WriteID names the write that stored this value (internal/kvcas).
	WriteID string `json:"write_id,omitempty"`
}

// Budget is a number of credits per period.
type Budget struct {
	Credits float64 `json:"credits"`
	Per     Period  `json:"per"`
}

// Refusal is why a job of the tenant s belongs to, asking priority and
// arrived for the tenant subject's tenant arrivedFor ("" when it came on
// no tenant subject), is refused (docs/tenants.md#who-may-act-for-a-tenant);
// "" when it is not.
func (s Settings) Refusal(tenant string, priority int, arrivedFor string) string {
	if s.Bound && arrivedFor != tenant {
		return fmt.Sprintf("tenant %s is bound: its jobs are accepted only on its tenant subjects (sluice.jobs.<kind>.t.%s) "+
			"or through the HTTP API with one of its keys", tenant, tenant)
	}
	if s.MaxPriority > 0 && priority < s.MaxPriority {
		return fmt.Sprintf("priority %d is more urgent than tenant %s's limit of %d (max_priority; 1 is the most urgent)",
			priority, tenant, s.MaxPriority)
	}
	return ""
}

// EffectiveWeight is Weight, or 1 when unset.
func (s Settings) EffectiveWeight() float64 {
	if s.Weight <= 0 {
		return 1
	}
	return s.Weight
}

// EffectiveOnBudget is OnBudget, or wait when unset.
func (s Settings) EffectiveOnBudget() OnBudget {
	if s.OnBudget == "" {
		return OnBudgetWait
	}
	return s.OnBudget
}

// Validate reports every broken rule of s, each naming its field.
func (s Settings) Validate() error {
	var errs []error
	if s.Weight < 0 || math.IsNaN(s.Weight) || math.IsInf(s.Weight, 0) {
		errs = append(errs, fmt.Errorf("weight: must be a number above 0, got %v", s.Weight))
	}
	for kind, n := range s.MaxTasks {
		if !slices.Contains(Kinds, kind) {
			errs = append(errs, fmt.Errorf("max_tasks: unknown kind %q (want one of %s)", kind, strings.Join(Kinds, ", ")))
		} else if n < 0 {
			errs = append(errs, fmt.Errorf("max_tasks.%s: must be 0 (no cap) or more, got %d", kind, n))
		}
	}
	if b := s.Budget; b != nil {
		if b.Credits < 0 || math.IsNaN(b.Credits) || math.IsInf(b.Credits, 0) {
			errs = append(errs, fmt.Errorf("budget: must be 0 or more credits, got %v", b.Credits))
		}
		if !slices.Contains([]Period{PerDay, PerWeek, PerMonth}, b.Per) {
			errs = append(errs, fmt.Errorf("budget.per: must be day, week or month, got %q", b.Per))
		}
	}
	if s.MaxPriority < 0 || s.MaxPriority > jobspec.MaxPriority {
		errs = append(errs, fmt.Errorf("max_priority: must be 1 (the most urgent) to %d, or 0 for no limit, got %d", jobspec.MaxPriority, s.MaxPriority))
	}
	if s.OnBudget != "" && s.OnBudget != OnBudgetWait && s.OnBudget != OnBudgetFail {
		errs = append(errs, fmt.Errorf("on_budget: must be wait or fail, got %q", s.OnBudget))
	}
	return errors.Join(errs...)
}

// This names the current period of p in a sentence: "today", "this
// week", "this month".
func (p Period) This() string {
	if p == PerDay {
		return "today"
	}
	return "this " + string(p)
}

// PeriodStart is the start of the period p that holds t (UTC).
func PeriodStart(p Period, t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch p {
	case PerWeek:
		back := (int(day.Weekday()) + 6) % 7 // days since Monday
		return day.AddDate(0, 0, -back)
	case PerMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	return day
}

// NextPeriod is the start of the period after the one of p that holds t.
func NextPeriod(p Period, t time.Time) time.Time {
	start := PeriodStart(p, t)
	switch p {
	case PerWeek:
		return start.AddDate(0, 0, 7)
	case PerMonth:
		return start.AddDate(0, 1, 0)
	}
	return start.AddDate(0, 0, 1)
}
