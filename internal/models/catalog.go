// Package models is the video model catalog (docs/job-spec.md#the-model-catalog):
// per model the resolutions, durations, ratios and input kinds it accepts,
// and the price rule each resolution maps to, with a default entry for the
// models it does not name. The shipped catalog holds the media document's
// values and the models public clients use; an operator's file
// (SLUICE_MEDIA_MODELS) extends or replaces it.
package models

import (
	_ "embed"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// The input kinds of a video request: its scenarios (media-api.md 2.4).
const (
	InputText      = "text_to_video"
	InputImage     = "image_to_video"
	InputReference = "multimodal_reference"
)

// inputKinds are the input kinds in the document's order.
var inputKinds = []string{InputText, InputImage, InputReference}

// Entry is what one model accepts.
type Entry struct {
	// Resolutions are spelled as the platform spells them: a spec's
	// resolution matches one whatever its case and is sent in this
	// spelling.
	Resolutions []string `json:"resolutions"`
	// Durations bound the whole seconds of a video.
	Durations Durations `json:"durations"`
	// Ratios are the aspect ratios; "adaptive" among them is what image
	// and reference scenarios may leave to the platform.
	Ratios []string `json:"ratios"`
	// Inputs are the input kinds (scenarios) the model takes.
	Inputs []string `json:"inputs"`
	// Prices maps a resolution to the price rule of a second of video
	// at it, a rule video.<name>.second; a resolution it leaves out is
	// priced by video.<resolution>.second (PriceRule).
	Prices map[string]string `json:"prices,omitempty"`
}

// Durations is an inclusive range of whole seconds.
type Durations struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Catalog is the model catalog. The zero Catalog accepts nothing; use
// Shipped or Load.
type Catalog struct {
	// Default is the entry a model the catalog does not name is checked
	// against.
	Default Entry `json:"default"`
	// Models are the named models' entries, by the name sent upstream.
	Models map[string]Entry `json:"models"`
}

//go:embed shipped.json
var shippedJSON []byte

// Shipped returns a fresh copy of the catalog sluice ships with.
func Shipped() *Catalog {
	c, err := parse(shippedJSON, "shipped catalog")
	if err != nil {
		panic("models: the shipped catalog is broken: " + err.Error())
	}
	return c
}

// Lookup returns the entry model is checked against and the model's name
// as the catalog spells it: an exact match first, then one that differs
// only in case. known is false when the catalog does not name the model:
// then name is model itself and the entry is the default one.
func (c *Catalog) Lookup(model string) (name string, e Entry, known bool) {
	if e, ok := c.Models[model]; ok {
		return model, e, true
	}
	// No two names differ only in case (validate), so at most one matches.
	for n, e := range c.Models {
		if strings.EqualFold(n, model) {
			return n, e, true
		}
	}
	return model, c.Default, false
}

// Resolution returns the entry's spelling of res, matched whatever its
// case.
func (e Entry) Resolution(res string) (string, bool) {
	return match(e.Resolutions, res)
}

// Ratio returns the entry's spelling of ratio ("adaptive" in any case).
func (e Entry) Ratio(ratio string) (string, bool) {
	return match(e.Ratios, ratio)
}

// Takes reports whether the entry takes input kind in.
func (e Entry) Takes(in string) bool { return slices.Contains(e.Inputs, in) }

// match finds s in list whatever its case.
func match(list []string, s string) (string, bool) {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return v, true
		}
	}
	return "", false
}

// PriceRule is the price rule of a second of video at resolution
// (docs/tenants.md#prices), resolution spelled as the catalog spells it.
func PriceRule(resolution string) string { return "video." + resolution + ".second" }

// RuleFor is the price rule of a second of video at resolution, spelled
// as the entry spells it.
func (e Entry) RuleFor(resolution string) string {
	if rule, ok := e.Prices[resolution]; ok {
		return rule
	}
	return PriceRule(resolution)
}

// PriceRules maps each of the entry's resolutions to its price rule.
func (e Entry) PriceRules() map[string]string {
	out := make(map[string]string, len(e.Resolutions))
	for _, r := range e.Resolutions {
		out[r] = e.RuleFor(r)
	}
	return out
}

// PriceRules lists the price rule of every resolution of every entry,
// the default entry's first, each once.
func (c *Catalog) PriceRules() []string {
	var out []string
	add := func(e Entry) {
		for _, r := range e.Resolutions {
			if rule := e.RuleFor(r); !slices.Contains(out, rule) {
				out = append(out, rule)
			}
		}
	}
	add(c.Default)
	for _, n := range slices.Sorted(maps.Keys(c.Models)) {
		add(c.Models[n])
	}
	return out
}

// validate reports the first rule an entry breaks, naming its field
// below path.
func (e Entry) validate(path string) error {
	if err := validList(path+".resolutions", e.Resolutions, resolutionToken); err != nil {
		return err
	}
	switch d := e.Durations; {
	case d.Min < 1:
		return fmt.Errorf("%s.durations.min: must be a whole number of seconds of 1 or more, got %d", path, d.Min)
	case d.Max < d.Min:
		return fmt.Errorf("%s.durations.max: must be at least durations.min (%d), got %d", path, d.Min, d.Max)
	}
	if err := validList(path+".ratios", e.Ratios, nil); err != nil {
		return err
	}
	if err := validList(path+".inputs", e.Inputs, nil); err != nil {
		return err
	}
	for i, in := range e.Inputs {
		if !slices.Contains(inputKinds, in) {
			return fmt.Errorf("%s.inputs[%d]: must be one of %s, got %q", path, i, strings.Join(inputKinds, ", "), in)
		}
	}
	for _, res := range slices.Sorted(maps.Keys(e.Prices)) {
		at := fmt.Sprintf("%s.prices[%q]", path, res)
		if !slices.Contains(e.Resolutions, res) {
			return fmt.Errorf("%s: names no resolution of the entry (%s, spelled alike)", at, strings.Join(e.Resolutions, ", "))
		}
		if !videoRule(e.Prices[res]) {
			return fmt.Errorf("%s: must be a rule video.<name>.second, <name> letters, digits, _, - and ., got %q", at, e.Prices[res])
		}
	}
	return nil
}

// videoRule reports whether rule is video.<name>.second with a name of
// letters, digits, "_", "-" and ".".
func videoRule(rule string) bool {
	name, ok := strings.CutPrefix(rule, "video.")
	if name, ok = strings.CutSuffix(name, ".second"); !ok || name == "" || strings.Trim(name, ".") != name {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validList checks a list of names: at least one, none empty, none twice
// (whatever its case), each passing check when given.
func validList(path string, list []string, check func(string) error) error {
	if len(list) == 0 {
		return fmt.Errorf("%s: must list at least one value", path)
	}
	for i, v := range list {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%s[%d]: must not be empty", path, i)
		}
		if j := slices.IndexFunc(list[:i], func(w string) bool { return strings.EqualFold(v, w) }); j >= 0 {
			return fmt.Errorf("%s[%d]: %q repeats %q (values match whatever their case)", path, i, v, list[j])
		}
		if check != nil {
			if err := check(v); err != nil {
				return fmt.Errorf("%s[%d]: %w", path, i, err)
			}
		}
	}
	return nil
}

// resolutionToken keeps a resolution usable inside its price rule: letters,
// digits, "_" and "-" only.
func resolutionToken(r string) error {
	for _, c := range r {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%q: a resolution is letters, digits, _ and - only (it names the price rule video.<resolution>.second)", r)
		}
	}
	return nil
}
