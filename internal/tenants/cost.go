package tenants

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

// Estimate is the cost of spec before it runs, from the price table
// (docs/tenants.md#estimates): a video's duration at its resolution's
// price per second; a speech job's characters; a compute job's nodes ×
// ppn × wall time in hours at compute.core_hour, plus nodes × gpus (and
// dcus) × wall time at their prices; a container's cards (gpus, or cpus
// for a cpu instance) × timeout in hours at the accelerator's price.
// covered is false when the table prices none of the job's units: the
// job is not priced at all (no reservation, no cost).
func (p *Prices) Estimate(spec *jobspec.Spec) (credits float64, covered bool) {
	if p == nil || spec == nil || len(p.Rules) == 0 {
		return 0, false
	}
	var parts []part
	switch {
	case spec.Video != nil:
		parts = []part{{p.videoRule(spec.Video.PriceRule()), float64(spec.Video.Parameters.Duration)}}
	case spec.Speech != nil:
		parts = []part{{RuleSpeechChar, float64(utf8.RuneCountInString(spec.Speech.Input.Text))}}
	case spec.Compute != nil:
		job := spec.Compute.Job
		hours := hoursOf(job.WallTime)
		nodes := float64(job.Nodes)
		parts = []part{
			{RuleComputeCoreHour, nodes * float64(job.PPN) * hours},
			{RuleComputeGPUHour, nodes * float64(deref(job.GPUs)) * hours},
			{RuleComputeDCUHour, nodes * float64(deref(job.DCUs)) * hours},
		}
	case spec.Container != nil:
		in := spec.Container.Instance
		parts = []part{{containerRule(in.Accelerator), containerCards(in.Accelerator, in.CPUs, in.GPUs) * hoursOf(in.Timeout)}}
	}
	return p.sum(parts)
}

// Run is what a finished job's record says of its run, besides usage.
type Run struct {
	// Submitted: a paid submit was sent (the job has an upstream id or
	// claimed a submit).
	Submitted bool
	// Succeeded: the job ended succeeded.
	Succeeded bool
	// Started and Ended bound the run upstream (a container's instance
	// from its create to the job's end); zero when unknown.
	Started, Ended time.Time
}

// Cost is the actual cost of a finished job (docs/tenants.md#actual-cost):
// a job never submitted costs 0; otherwise it is taken from upstream's
// usage (video: usage.video_duration at usage.resolution's price, speech:
// usage.input_chars_num, compute: the history's cpuNuclearHour,
// gpuCardHour and dcuCardHour), and for a container from the time its
// instance lived (its create to the job's end, at most its timeout). A
// media job without usage costs its estimate when it succeeded and 0
// otherwise; a compute job without accounting costs its estimate.
// covered is as Estimate's.
func (p *Prices) Cost(spec *jobspec.Spec, usage json.RawMessage, run Run) (credits float64, covered bool) {
	estimate, covered := p.Estimate(spec)
	if !covered || !run.Submitted {
		return 0, covered
	}
	u := usageOf(usage)
	switch {
	case spec.Video != nil && u.has("video_duration"):
		// The spec's rule, unless upstream reports another resolution
		// the table prices.
		rule := p.videoRule(spec.Video.PriceRule())
		if res := u.str("resolution"); !strings.EqualFold(res, spec.Video.Parameters.Resolution) && p.Has(p.videoRule(VideoRule(res))) {
			rule = p.videoRule(VideoRule(res))
		}
		return p.Price(rule) * u.num("video_duration"), true
	case spec.Speech != nil && u.has("input_chars_num"):
		return p.Price(RuleSpeechChar) * u.num("input_chars_num"), true
	case spec.Compute != nil && (u.has("cpuNuclearHour") || u.has("gpuCardHour") || u.has("dcuCardHour")):
		return p.sum([]part{
			{RuleComputeCoreHour, u.num("cpuNuclearHour")},
			{RuleComputeGPUHour, u.num("gpuCardHour")},
			{RuleComputeDCUHour, u.num("dcuCardHour")},
		})
	case spec.Container != nil:
		return p.containerCost(spec.Container.Instance, run), true
	case spec.Compute != nil || run.Succeeded:
		return estimate, true
	}
	return 0, true
}

// videoRule is the table's spelling of want, a video rule matched
// whatever its case: upstream's usage may spell a resolution otherwise
// than the catalog.
func (p *Prices) videoRule(want string) string {
	if p.Has(want) {
		return want
	}
	for rule := range p.Rules {
		if strings.EqualFold(rule, want) {
			return rule
		}
	}
	return want
}

// containerCost prices the hours a container's instance lived.
func (p *Prices) containerCost(in jobspec.ContainerInstance, run Run) float64 {
	if run.Started.IsZero() || run.Ended.Before(run.Started) {
		return 0
	}
	hours := min(run.Ended.Sub(run.Started).Hours(), hoursOf(in.Timeout))
	return p.Price(containerRule(in.Accelerator)) * containerCards(in.Accelerator, in.CPUs, in.GPUs) * hours
}

// part is a quantity of one rule's unit.
type part struct {
	rule     string
	quantity float64
}

// sum prices parts; covered when the table has any of their rules.
func (p *Prices) sum(parts []part) (credits float64, covered bool) {
	for _, pt := range parts {
		if p.Has(pt.rule) {
			covered = true
			credits += p.Price(pt.rule) * pt.quantity
		}
	}
	return credits, covered
}

func containerRule(accelerator string) string {
	return "container." + accelerator + "_hour"
}

// containerCards is what a container instance is billed by: its cpus for
// a cpu instance, else its accelerator cards.
func containerCards(accelerator string, cpus, gpus int) float64 {
	if accelerator == "cpu" {
		return float64(cpus)
	}
	return float64(gpus)
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// hoursOf parses HH:MM:SS into hours; 0 when malformed.
func hoursOf(hms string) float64 {
	f := strings.Split(hms, ":")
	if len(f) != 3 {
		return 0
	}
	var secs float64
	for i, unit := range []float64{3600, 60, 1} {
		n, err := strconv.Atoi(f[i])
		if err != nil || n < 0 {
			return 0
		}
		secs += float64(n) * unit
	}
	return secs / 3600
}

// usage is an upstream usage object whose numbers may come as JSON
// numbers or strings (the platform's history sends strings).
type usage map[string]json.RawMessage

func usageOf(raw json.RawMessage) usage {
	var u usage
	if len(raw) == 0 || json.Unmarshal(raw, &u) != nil {
		return nil
	}
	return u
}

func (u usage) has(key string) bool {
	v, ok := u[key]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func (u usage) num(key string) float64 {
	v := bytes.TrimSpace(u[key])
	var s string
	if json.Unmarshal(v, &s) == nil {
		v = []byte(strings.TrimSpace(s))
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f < 0 {
		return 0
	}
	return f
}

func (u usage) str(key string) string {
	var s string
	_ = json.Unmarshal(u[key], &s)
	return s
}
