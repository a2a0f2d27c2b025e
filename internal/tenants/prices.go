package tenants

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// VideoResolutions are the resolutions of spec/media-api's video
// parameters, each priced per second by rule video.<resolution>.second.
var VideoResolutions = []string{"768P", "2K"}

// The price rules besides the video ones (docs/tenants.md#prices).
const (
	RuleSpeechChar       = "speech.char"
	RuleComputeCoreHour  = "compute.core_hour"
	RuleComputeGPUHour   = "compute.gpu_hour"
	RuleComputeDCUHour   = "compute.dcu_hour"
	RuleContainerGPUHour = "container.gpu_hour"
	RuleContainerDCUHour = "container.dcu_hour"
	RuleContainerMLUHour = "container.mlu_hour"
	RuleContainerCPUHour = "container.cpu_hour"
	videoRulePrefix      = "video."
	videoRuleSuffix      = ".second"
)

// VideoRule is the rule pricing a second of video at resolution.
func VideoRule(resolution string) string { return videoRulePrefix + resolution + videoRuleSuffix }

// Rules lists every known price rule.
func Rules() []string {
	var out []string
	for _, r := range VideoResolutions {
		out = append(out, VideoRule(r))
	}
	return append(out, RuleSpeechChar, RuleComputeCoreHour, RuleComputeGPUHour, RuleComputeDCUHour,
		RuleContainerGPUHour, RuleContainerDCUHour, RuleContainerMLUHour, RuleContainerCPUHour)
}

// Prices is the price table, the value of key prices: credits per unit,
// by rule. A rule that is absent prices its unit at nothing.
type Prices struct {
	Rules map[string]float64 `json:"rules"`
	// WriteID names the write that stored this value (internal/kvcas).
	WriteID string `json:"write_id,omitempty"`
}

// Has reports whether the table prices rule.
func (p *Prices) Has(rule string) bool {
	if p == nil {
		return false
	}
	_, ok := p.Rules[rule]
	return ok
}

// PricesKind reports whether the table has a rule for some unit of kind
// (the rules of a kind are named <kind>.<unit>).
func (p *Prices) PricesKind(kind string) bool {
	if p == nil {
		return false
	}
	for rule := range p.Rules {
		if strings.HasPrefix(rule, kind+".") {
			return true
		}
	}
	return false
}

// Price is the price of rule, 0 when absent.
func (p *Prices) Price(rule string) float64 {
	if p == nil {
		return 0
	}
	return p.Rules[rule]
}

// Validate reports every rule that names no known unit and every price
// that is not a number of 0 or more.
func (p *Prices) Validate() error {
	var errs []error
	known := Rules()
	for _, rule := range slices.Sorted(maps.Keys(p.Rules)) {
		price := p.Rules[rule]
		switch {
		case !slices.Contains(known, rule):
			errs = append(errs, fmt.Errorf("%s: names no known unit (known: %s)", rule, strings.Join(known, ", ")))
		case price < 0 || math.IsNaN(price) || math.IsInf(price, 0):
			errs = append(errs, fmt.Errorf("%s: price must be 0 or more credits, got %v", rule, price))
		}
	}
	return errors.Join(errs...)
}

// ParseRule parses RULE=PRICE.
func ParseRule(arg string) (rule string, price float64, err error) {
	rule, val, ok := strings.Cut(arg, "=")
	if !ok || rule == "" {
		return "", 0, fmt.Errorf("%q: want RULE=PRICE, such as video.768P.second=0.5", arg)
	}
	price, err = strconv.ParseFloat(val, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%s: price %q is not a number", rule, val)
	}
	p := Prices{Rules: map[string]float64{rule: price}}
	return rule, price, p.Validate()
}
