package tenants

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/internal/models"
)

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
)

// VideoRule is the rule pricing a second of video at resolution, spelled
// as the model catalog spells it.
func VideoRule(resolution string) string { return models.PriceRule(resolution) }

// Rules lists every known price rule: the video rules of the model
// catalog cat, then the others.
func Rules(cat *models.Catalog) []string {
	out := cat.PriceRules()
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

// Validate reports every rule that names no known unit (under the model
// catalog cat) and every price that is not a number of 0 or more.
func (p *Prices) Validate(cat *models.Catalog) error {
	var errs []error
	known := Rules(cat)
	for _, rule := range slices.Sorted(maps.Keys(p.Rules)) {
		price := p.Rules[rule]
		switch {
		case !slices.Contains(known, rule):
			errs = append(errs, fmt.Errorf("%s: names no known unit (known: %s)", rule, strings.Join(known, ", ")))
		default:
			if err := checkPrice(rule, price); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ParseRule parses RULE=PRICE and checks the price; whether the rule
// names a known unit depends on the model catalog in force (Validate).
func ParseRule(arg string) (rule string, price float64, err error) {
	rule, val, ok := strings.Cut(arg, "=")
	if !ok || rule == "" {
		return "", 0, fmt.Errorf("%q: want RULE=PRICE, such as video.768P.second=0.5", arg)
	}
	price, err = strconv.ParseFloat(val, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%s: price %q is not a number", rule, val)
	}
	if err := checkPrice(rule, price); err != nil {
		return "", 0, err
	}
	return rule, price, nil
}

// checkPrice refuses a price that is not a number of 0 or more.
func checkPrice(rule string, price float64) error {
	if price < 0 || math.IsNaN(price) || math.IsInf(price, 0) {
		return fmt.Errorf("%s: price must be 0 or more credits, got %v", rule, price)
	}
	return nil
}
