package tenants_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/tenants"
)

// Policy is the scheduler's reading of the tenants, as the order half of
// fair scheduling declares it; the View must implement it.
type Policy interface {
	Enabled() bool
	Weight(tenant string) float64
	MaxTasks(tenant, kind string) int
	BudgetHolds(tenant, kind string) bool
}

var _ Policy = (*tenants.View)(nil)

func TestSettingsValidate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		s    tenants.Settings
		want string // "" valid
	}{
		{"empty", tenants.Settings{}, ""},
		{"full", tenants.Settings{Weight: 3, MaxTasks: map[string]int{"video": 4, "compute": 0},
			Budget: &tenants.Budget{Credits: 100, Per: tenants.PerMonth}, OnBudget: tenants.OnBudgetFail}, ""},
		{"bound, max priority", tenants.Settings{Bound: true, MaxPriority: 2}, ""},
		{"max priority 6", tenants.Settings{MaxPriority: 6}, "max_priority:"},
		{"negative max priority", tenants.Settings{MaxPriority: -1}, "max_priority:"},
		{"negative weight", tenants.Settings{Weight: -1}, "weight:"},
		{"NaN weight", tenants.Settings{Weight: math.NaN()}, "weight:"},
		{"unknown kind", tenants.Settings{MaxTasks: map[string]int{"audio": 1}}, `max_tasks: unknown kind "audio"`},
		{"negative cap", tenants.Settings{MaxTasks: map[string]int{"video": -1}}, "max_tasks.video:"},
		{"negative budget", tenants.Settings{Budget: &tenants.Budget{Credits: -5, Per: tenants.PerDay}}, "budget:"},
		{"bad period", tenants.Settings{Budget: &tenants.Budget{Credits: 5, Per: "year"}}, "budget.per:"},
		{"bad on_budget", tenants.Settings{OnBudget: "drop"}, "on_budget:"},
	} {
		err := tt.s.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}

func TestParseRule(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		arg, want string
	}{
		{"video.768P.second=0.5", ""},
		{"video.2K.second=1", ""},
		{"speech.char=0.001", ""},
		{"compute.core_hour=2", ""},
		{"container.dcu_hour=3", ""},
		{"video.1080p.second=1", ""},
		{"speech.char=-1", "0 or more"},
		{"speech.char=cheap", "not a number"},
		{"speech.char", "want RULE=PRICE"},
	} {
		_, _, err := tenants.ParseRule(tt.arg)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.arg, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want %q", tt.arg, err, tt.want)
		}
	}
}

// TestPriceRulesFollowTheCatalog: the video rules are the catalog's
// resolutions, so the table prices 720p/1080p under the shipped catalog
// and 4K only under a catalog that has it.
func TestPriceRulesFollowTheCatalog(t *testing.T) {
	t.Parallel()
	shipped := models.Shipped()
	for _, rule := range []string{"video.768P.second", "video.2K.second", "video.720p.second", "video.1080p.second", "speech.char"} {
		if err := (&tenants.Prices{Rules: map[string]float64{rule: 1}}).Validate(shipped); err != nil {
			t.Errorf("%s: %v", rule, err)
		}
	}
	for _, rule := range []string{"video.4K.second", "gpu_hour", "video.1080P.second"} {
		err := (&tenants.Prices{Rules: map[string]float64{rule: 1}}).Validate(shipped)
		if err == nil || !strings.Contains(err.Error(), "names no known unit") {
			t.Errorf("%s: err = %v", rule, err)
		}
	}
	if rules := strings.Join(tenants.Rules(shipped), " "); !strings.Contains(rules, "video.1080p.second") {
		t.Errorf("Rules() = %s", rules)
	}
	fourK := &models.Catalog{Default: shipped.Default, Models: map[string]models.Entry{"Studio-X": {
		Resolutions: []string{"4K"}, Durations: models.Durations{Min: 4, Max: 30}, Ratios: []string{"16:9"}, Inputs: []string{models.InputText}}}}
	if err := (&tenants.Prices{Rules: map[string]float64{"video.4K.second": 1}}).Validate(fourK); err != nil {
		t.Errorf("4K under a catalog that has it: %v", err)
	}
}

// TestVideoPricedByCatalogResolution: a 1080p video is priced by
// video.1080p.second, also when upstream's usage spells it 1080P.
func TestVideoPricedByCatalogResolution(t *testing.T) {
	t.Parallel()
	prices := &tenants.Prices{Rules: map[string]float64{"video.1080p.second": 3, "video.720p.second": 1}}
	video := &jobspec.Spec{Kind: jobspec.KindVideo, Video: &jobspec.Video{Model: "HappyHorse-1.0-T2V",
		Parameters: jobspec.VideoParameters{Resolution: "1080p", Duration: 5}}}
	if est, covered := prices.Estimate(video); !covered || est != 15 {
		t.Errorf("Estimate = %v, %v; want 15", est, covered)
	}
	done := tenants.Run{Submitted: true, Succeeded: true}
	if cost, _ := prices.Cost(video, json.RawMessage(`{"video_duration":5,"resolution":"1080P"}`), done); cost != 15 {
		t.Errorf("Cost with usage 1080P = %v, want 15", cost)
	}
	if cost, _ := prices.Cost(video, json.RawMessage(`{"video_duration":4,"resolution":"720P"}`), done); cost != 4 {
		t.Errorf("Cost with usage 720P = %v, want 4 (upstream's resolution, priced by the table's rule)", cost)
	}
}

func intp(n int) *int { return &n }

func TestEstimateAndCost(t *testing.T) {
	t.Parallel()
	prices := &tenants.Prices{Rules: map[string]float64{
		"video.768P.second": 0.5, "video.2K.second": 2, "speech.char": 0.01,
		"compute.core_hour": 1, "compute.gpu_hour": 10, "container.gpu_hour": 8, "container.cpu_hour": 0.5,
	}}
	video := &jobspec.Spec{Kind: jobspec.KindVideo, Video: &jobspec.Video{Parameters: jobspec.VideoParameters{Resolution: "768P", Duration: 10}}}
	speech := &jobspec.Spec{Kind: jobspec.KindSpeech, Speech: &jobspec.Speech{Input: jobspec.SpeechInput{Text: "héllo"}}}
	compute := &jobspec.Spec{Kind: jobspec.KindCompute, Compute: &jobspec.Compute{Job: jobspec.ComputeJob{
		Nodes: 2, PPN: 4, WallTime: "01:30:00", GPUs: intp(1)}}}
	gpuBox := &jobspec.Spec{Kind: jobspec.KindContainer, Container: &jobspec.Container{Instance: jobspec.ContainerInstance{
		Accelerator: "gpu", CPUs: 8, GPUs: 2, Timeout: "02:00:00"}}}
	cpuBox := &jobspec.Spec{Kind: jobspec.KindContainer, Container: &jobspec.Container{Instance: jobspec.ContainerInstance{
		Accelerator: "cpu", CPUs: 8, Timeout: "02:00:00"}}}
	dcuBox := &jobspec.Spec{Kind: jobspec.KindContainer, Container: &jobspec.Container{Instance: jobspec.ContainerInstance{
		Accelerator: "dcu", CPUs: 8, GPUs: 1, Timeout: "01:00:00"}}}
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	done := tenants.Run{Submitted: true, Succeeded: true}
	for _, tt := range []struct {
		name     string
		spec     *jobspec.Spec
		usage    string
		run      tenants.Run
		estimate float64
		cost     float64
		covered  bool
	}{
		{"video from usage", video, `{"video_duration":8,"resolution":"2K"}`, done, 5, 16, true},
		{"video without usage succeeded", video, ``, done, 5, 5, true},
		{"video without usage failed", video, `null`, tenants.Run{Submitted: true}, 5, 0, true},
		{"video never submitted", video, ``, tenants.Run{}, 5, 0, true},
		{"speech counts characters", speech, `{"input_chars_num":300}`, done, 0.05, 3, true},
		{"compute from history strings", compute, `{"cpuNuclearHour":"10.5","gpuCardHour":"1"}`, done, 2*4*1.5 + 2*1*1.5*10, 20.5, true},
		{"compute without accounting", compute, `{}`, tenants.Run{Submitted: true}, 42, 42, true},
		{"gpu container by time alive", gpuBox, ``, tenants.Run{Submitted: true, Started: t0, Ended: t0.Add(30 * time.Minute)}, 32, 8, true},
		{"cpu container capped at timeout", cpuBox, ``, tenants.Run{Submitted: true, Started: t0, Ended: t0.Add(5 * time.Hour)}, 8, 8, true},
		{"dcu container not priced", dcuBox, ``, done, 0, 0, false},
	} {
		est, covered := prices.Estimate(tt.spec)
		if covered != tt.covered || math.Abs(est-tt.estimate) > 1e-9 {
			t.Errorf("%s: Estimate = %v, %v; want %v, %v", tt.name, est, covered, tt.estimate, tt.covered)
		}
		cost, covered := prices.Cost(tt.spec, json.RawMessage(tt.usage), tt.run)
		if covered != tt.covered || math.Abs(cost-tt.cost) > 1e-9 {
			t.Errorf("%s: Cost = %v, %v; want %v, %v", tt.name, cost, covered, tt.cost, tt.covered)
		}
	}
	var none *tenants.Prices
	if _, covered := none.Estimate(video); covered {
		t.Error("no price table covers a job")
	}
}

func TestPeriods(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC) // a Friday
	for _, tt := range []struct {
		per         tenants.Period
		start, next string
	}{
		{tenants.PerDay, "2026-11-27", "2026-11-28"},
		{tenants.PerWeek, "2026-11-23", "2026-11-30"},
		{tenants.PerMonth, "2026-11-01", "2026-12-01"},
	} {
		if got := tenants.PeriodStart(tt.per, at).Format(time.DateOnly); got != tt.start {
			t.Errorf("%s start = %s, want %s", tt.per, got, tt.start)
		}
		if got := tenants.NextPeriod(tt.per, at).Format(time.DateOnly); got != tt.next {
			t.Errorf("%s next = %s, want %s", tt.per, got, tt.next)
		}
	}
}

// TestVideoPricedByTheModelsRule: a catalog entry that maps a resolution
// to a rule of its own prices that model's videos by it, estimate and
// cost alike; the rule is known to the table's validation.
func TestVideoPricedByTheModelsRule(t *testing.T) {
	t.Parallel()
	shipped := models.Shipped()
	e := shipped.Models["Seedance2.0"]
	e.Prices = map[string]string{"1080p": "video.seedance-1080p.second"}
	shipped.Models["Seedance2.0"] = e
	doc := `{"kind":"video","video":{"model":"Seedance2.0","input":{"prompt":"p"},"parameters":{"resolution":"1080P","duration":5,"ratio":"16:9"}}}`
	spec, err := jobspec.DecodeWith([]byte(doc), jobspec.KindVideo, shipped)
	if err != nil {
		t.Fatal(err)
	}
	prices := &tenants.Prices{Rules: map[string]float64{"video.seedance-1080p.second": 7, "video.1080p.second": 3}}
	if err := prices.Validate(shipped); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if est, _ := prices.Estimate(spec); est != 35 {
		t.Errorf("Estimate = %v, want 35 (the model's own rule)", est)
	}
	done := tenants.Run{Submitted: true, Succeeded: true}
	if cost, _ := prices.Cost(spec, json.RawMessage(`{"video_duration":5,"resolution":"1080p"}`), done); cost != 35 {
		t.Errorf("Cost = %v, want 35", cost)
	}
}

// A bound tenant's job is refused unless it arrived on the tenant's own
// subject; a job more urgent than the tenant's max priority is refused;
// an unbound tenant without a limit refuses nothing.
func TestSettingsRefusal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		s          tenants.Settings
		priority   int
		arrivedFor string
		want       string // "" accepted
	}{
		{"unbound", tenants.Settings{}, 1, "", ""},
		{"bound, on its subject", tenants.Settings{Bound: true}, 1, "acme", ""},
		{"bound, plain subject", tenants.Settings{Bound: true}, 3, "", "tenant acme is bound"},
		{"bound, another's subject", tenants.Settings{Bound: true}, 3, "other", "tenant acme is bound"},
		{"at the limit", tenants.Settings{MaxPriority: 2}, 2, "", ""},
		{"less urgent", tenants.Settings{MaxPriority: 2}, 5, "", ""},
		{"more urgent", tenants.Settings{Bound: true, MaxPriority: 2}, 1, "acme", "priority 1 is more urgent than tenant acme's limit of 2"},
	} {
		got := tt.s.Refusal("acme", tt.priority, tt.arrivedFor)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: Refusal = %q, want %q", tt.name, got, tt.want)
		}
	}
}
