package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/tenants"
)

const tenantsAbout = `Set and show the tenants' settings in SLUICE_TENANTS (docs/tenants.md):
a weight (its share of the starts within a priority, default 1), caps of
tasks upstream at once per kind (0: none), a budget of credits per day,
week or month (UTC) and what a job over it does: wait for the next period
(default) or fail with budget_exhausted.

"set" changes only the settings its flags name and writes nothing when one
is invalid. --budget none removes the budget. "list" and "show" print the
settings with the jobs in flight (open budget reservations), the spend
this period (a month without a budget) and whether the tenant's jobs wait
for budget.

--bound accepts the tenant's jobs only from its tenant subjects
(sluice.jobs.<kind>.t.<tenant>; see enqueue --as-tenant) or the HTTP API
with one of its keys; --max-priority N refuses its jobs more urgent than N.
Either refusal fails the job tenant_refused before anything is submitted.

Exit codes: 0 done, 2 usage error or invalid setting (nothing written;
every bad flag is named), 6 "show" of a tenant with no settings, no spend
and no waiting job, 5 NATS unreachable or another runtime error.`

// tenantFlags are the flags of "tenants set".
type tenantFlags struct {
	cf          connFlags
	weight      float64
	maxTasks    maxTasksFlag
	budget      string
	per         string
	onBudget    string
	bound       bool
	maxPriority int
}

func (f *tenantFlags) register(fs *flag.FlagSet) {
	f.cf.register(fs)
	f.maxTasks = maxTasksFlag{}
	fs.Float64Var(&f.weight, "weight", 0, "set: the tenant's share of the starts within a priority, above 0")
	fs.Var(f.maxTasks, "max-tasks", "set: cap of the tenant's tasks upstream at once, `KIND=N` (repeatable; 0: no cap)")
	fs.StringVar(&f.budget, "budget", "", "set: credits the tenant may spend per period, 0 or more (none: remove the budget)")
	fs.StringVar(&f.per, "per", "", "set: with --budget, the period: day, week or month (UTC; default month)")
	fs.StringVar(&f.onBudget, "on-budget", "", "set: what a job over the budget does: wait or fail")
	fs.BoolVar(&f.bound, "bound", false, "set: accept the tenant's jobs only from its tenant subjects or its HTTP API keys (--bound=false: from any)")
	fs.IntVar(&f.maxPriority, "max-priority", 0, "set: the most urgent priority the tenant's jobs may ask, 1 (most urgent) to 5; 0: no limit")
}

// maxTasksFlag is a repeatable --max-tasks KIND=N.
type maxTasksFlag map[string]int

func (m maxTasksFlag) String() string { return "" }
func (m maxTasksFlag) Set(v string) error {
	kind, n, ok := strings.Cut(v, "=")
	if !ok || !slices.Contains(tenants.Kinds, kind) {
		return fmt.Errorf("want KIND=N with KIND one of %s, got %q", strings.Join(tenants.Kinds, ", "), v)
	}
	i, err := strconv.Atoi(n)
	if err != nil || i < 0 {
		return fmt.Errorf("want KIND=N with N a whole number, 0 or more, got %q", v)
	}
	m[kind] = i
	return nil
}

func runTenants(ctx context.Context, a *app, args []string) error {
	fs := newFlagSet("tenants")
	var f tenantFlags
	f.register(fs)
	h := help{
		usage: "enqueue tenants set TENANT [--weight N] [--max-tasks KIND=N]... [--budget CREDITS [--per day|week|month]] [--on-budget wait|fail] [--bound[=false]] [--max-priority N]\n" +
			"  enqueue tenants list [--json]\n  enqueue tenants show TENANT [--json]",
		about: tenantsAbout,
		examples: `  enqueue tenants set team-a --weight 3 --max-tasks video=4
  enqueue tenants set team-b --budget 500 --per month --on-budget fail
  enqueue tenants set team-b --bound --max-priority 2
  enqueue tenants show team-b --json`,
	}
	sub, args, err := a.subcommand(fs, h, args)
	if sub == "" {
		return err
	}
	seen := map[string]bool{}
	rest, err := a.parse(fs, h.printer(fs), args)
	if err != nil {
		return err
	}
	fs.Visit(func(fl *flag.Flag) { seen[fl.Name] = true })
	switch sub {
	case "set":
		return a.setTenant(ctx, &f, seen, rest)
	case "list":
		if err := noArgs("tenants list", rest); err != nil {
			return err
		}
		return a.showTenants(ctx, &f.cf, nil)
	case "show":
		if len(rest) != 1 || !jobspec.ValidID(rest[0]) {
			return usageErrorf("tenants show: want one TENANT, an id matching ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$, got %q", rest)
		}
		return a.showTenants(ctx, &f.cf, rest)
	}
	return usageErrorf("tenants: unknown subcommand %q (want set, list or show)", sub)
}

// tenantChange checks the flags of "tenants set", reporting every bad
// one at once, and returns the change they make to a tenant's settings.
func tenantChange(f *tenantFlags, seen map[string]bool) (func(*tenants.Settings), error) {
	if len(seen) == 0 {
		return nil, usageErrorf("tenants set: nothing to set (give --weight, --max-tasks, --budget, --on-budget, --bound or --max-priority)")
	}
	var bad []string
	if seen["weight"] && !(f.weight > 0) || math.IsInf(f.weight, 0) {
		bad = append(bad, fmt.Sprintf("--weight: must be a number above 0, got %v", f.weight))
	}
	if seen["on-budget"] && f.onBudget != "wait" && f.onBudget != "fail" {
		bad = append(bad, fmt.Sprintf("--on-budget: want wait or fail, got %q", f.onBudget))
	}
	if seen["max-priority"] && (f.maxPriority < 0 || f.maxPriority > jobspec.MaxPriority) {
		bad = append(bad, fmt.Sprintf("--max-priority: want 1 (the most urgent) to %d, or 0 for no limit, got %d", jobspec.MaxPriority, f.maxPriority))
	}
	budget, problems := budgetFlags(f, seen)
	if bad = append(bad, problems...); len(bad) > 0 {
		return nil, usageErrorf("%s", strings.Join(bad, "\n"))
	}
	return func(s *tenants.Settings) {
		if seen["weight"] {
			s.Weight = f.weight
		}
		if len(f.maxTasks) > 0 && s.MaxTasks == nil {
			s.MaxTasks = map[string]int{}
		}
		maps.Copy(s.MaxTasks, f.maxTasks)
		if seen["budget"] {
			s.Budget = budget
		}
		if seen["on-budget"] {
			s.OnBudget = tenants.OnBudget(f.onBudget)
		}
		if seen["bound"] {
			s.Bound = f.bound
		}
		if seen["max-priority"] {
			s.MaxPriority = f.maxPriority
		}
	}, nil
}

// budgetFlags is the budget --budget and --per set (nil for none), and
// what is wrong with them.
func budgetFlags(f *tenantFlags, seen map[string]bool) (*tenants.Budget, []string) {
	if seen["per"] && !seen["budget"] {
		return nil, []string{"--per: needs --budget"}
	}
	if !seen["budget"] || f.budget == "none" {
		return nil, nil
	}
	var bad []string
	credits, err := strconv.ParseFloat(f.budget, 64)
	if err != nil || credits < 0 || math.IsNaN(credits) || math.IsInf(credits, 0) {
		bad = append(bad, fmt.Sprintf("--budget: want credits, a finite number 0 or more, or none, got %q", f.budget))
	}
	budget := &tenants.Budget{Credits: 0, Per: tenants.Period(cmp.Or(f.per, string(tenants.PerMonth)))}
	if err := (tenants.Settings{Budget: budget}).Validate(); err != nil {
		bad = append(bad, fmt.Sprintf("--per: want day, week or month, got %q", f.per))
	}
	budget.Credits = credits
	return budget, bad
}

func (a *app) setTenant(ctx context.Context, f *tenantFlags, seen map[string]bool, rest []string) error {
	if len(rest) != 1 || !jobspec.ValidID(rest[0]) {
		return usageErrorf("tenants set: want one TENANT, an id matching ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$, got %q", rest)
	}
	delete(seen, "nats-url")
	delete(seen, "creds")
	delete(seen, "json")
	change, err := tenantChange(f, seen)
	if err != nil {
		return err
	}
	client, err := a.dial(ctx, &f.cf)
	if err != nil {
		return err
	}
	defer client.Close()
	s, err := client.SetTenant(ctx, rest[0], change)
	if err != nil {
		return err
	}
	if f.cf.json {
		return writeJSON(a.env.Stdout, tenantReport{Tenant: rest[0], Settings: s})
	}
	fmt.Fprintf(a.env.Stdout, "tenant %s set: %s\n", rest[0], settingsText(s))
	return nil
}

// tenantReport is one tenant in the JSON output of tenants list and show.
type tenantReport struct {
	Tenant   string           `json:"tenant"`
	Settings tenants.Settings `json:"settings"`
	// InFlight counts the tenant's open budget reservations.
	InFlight int `json:"in_flight"`
	// Waiting counts the tenant's jobs in its class queues that no
	// worker has taken yet (docs/lifecycle.md, "Order of starts"); those
	// a worker holds are running or waiting in it for budget or a retry.
	Waiting uint64 `json:"waiting"`
	// Spent and Reserved are this period's credits.
	Spent    float64        `json:"spent"`
	Reserved float64        `json:"reserved"`
	Period   tenants.Period `json:"period"`
	// BudgetReached: the period's spent and reserved credits reach the
	// budget (on_budget wait), so the scheduler starts none of its jobs.
	BudgetReached bool `json:"budget_reached"`
	// WaitingForBudget: one of its jobs waits for budget now, before a
	// worker took it or in a worker (among the first waitingScan read).
	WaitingForBudget bool `json:"waiting_for_budget"`
}

// waitingScan bounds the waiting messages tenants show reads per tenant
// to find one waiting for budget: one request each.
const waitingScan = 200

func (a *app) showTenants(ctx context.Context, cf *connFlags, only []string) error {
	client, err := a.dial(ctx, cf)
	if err != nil {
		return err
	}
	defer client.Close()
	v, err := client.Tenants(ctx)
	if err != nil {
		return err
	}
	classes, err := client.WaitingByClass(ctx)
	if err != nil {
		return err
	}
	waiting, queued := map[string]uint64{}, map[string]uint64{}
	for _, c := range classes {
		waiting[c.Tenant] += c.NotStarted()
		queued[c.Tenant] += c.Messages
	}
	ids := v.Tenants()
	for t := range queued {
		if !slices.Contains(ids, t) {
			ids = append(ids, t)
		}
	}
	slices.Sort(ids)
	if only != nil {
		if !slices.Contains(ids, only[0]) {
			return &exitError{code: ExitNoSuchJob, err: fmt.Errorf("tenant %s has no settings and no spend, and no job of it waits "+
				"(its jobs would count with weight 1, no cap and no budget)", only[0])}
		}
		ids = only
	}
	reports := make([]tenantReport, 0, len(ids))
	for _, id := range ids {
		s, _ := v.Settings(id)
		spent, reserved := v.Spend(id)
		s.WriteID = ""
		r := tenantReport{Tenant: id, Settings: s, InFlight: v.Open(id), Waiting: waiting[id],
			Spent: spent, Reserved: reserved, Period: v.Period(id), BudgetReached: v.WaitingForBudget(id)}
		if r.WaitingForBudget, err = waitsForBudget(ctx, client, id, s, queued[id]); err != nil {
			return err
		}
		reports = append(reports, r)
	}
	if cf.json {
		return writeJSON(a.env.Stdout, map[string]any{"tenants": reports})
	}
	printTenants(a.env.Stdout, reports)
	return nil
}

// waitsForBudget reports whether one of tenant's waiting jobs waits for
// budget; only a tenant with a budget and jobs queued (taken by a worker
// or not) is read.
func waitsForBudget(ctx context.Context, client *jobclient.Client, tenant string, s tenants.Settings, queued uint64) (bool, error) {
	if s.Budget == nil || queued == 0 {
		return false, nil
	}
	jobs, err := client.TenantWaiting(ctx, tenant, waitingScan)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(jobs, func(j jobclient.Job) bool { return j.WaitingFor == jobclient.WaitingForBudget }), nil
}

func printTenants(w io.Writer, rs []tenantReport) {
	if len(rs) == 0 {
		fmt.Fprintln(w, "no tenant has settings or spend (every job counts as tenant default, weight 1, no budget)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tIN FLIGHT\tWAITING\tSPENT\tRESERVED\tPERIOD\tBUDGET REACHED\tWAITING FOR BUDGET\tSETTINGS")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Tenant, r.InFlight, r.Waiting, tenants.Credits(r.Spent),
			tenants.Credits(r.Reserved), r.Period, yesNo(r.BudgetReached), yesNo(r.WaitingForBudget), settingsText(r.Settings))
	}
	_ = tw.Flush()
}

// settingsText is one line of a tenant's settings.
func settingsText(s tenants.Settings) string {
	parts := []string{"weight " + strconv.FormatFloat(s.EffectiveWeight(), 'g', -1, 64)}
	for _, k := range slices.Sorted(maps.Keys(s.MaxTasks)) {
		parts = append(parts, fmt.Sprintf("max-tasks %s=%d", k, s.MaxTasks[k]))
	}
	if b := s.Budget; b != nil {
		parts = append(parts, fmt.Sprintf("budget %s per %s, on-budget %s", tenants.Credits(b.Credits), b.Per, s.EffectiveOnBudget()))
	}
	if s.Bound {
		parts = append(parts, "bound")
	}
	if s.MaxPriority > 0 {
		parts = append(parts, fmt.Sprintf("max-priority %d", s.MaxPriority))
	}
	return strings.Join(parts, ", ")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
