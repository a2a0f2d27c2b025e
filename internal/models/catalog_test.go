package models

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeFile writes a catalog file into a fresh directory.
func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestShippedHoldsDocumentedAndObservedValues: the three models public
// clients use take 720p/1080p and 4-15 s; the default entry is the union
// of the documented and observed values, and refuses 4K.
func TestShippedHoldsDocumentedAndObservedValues(t *testing.T) {
	t.Parallel()
	c := Shipped()
	for _, m := range []string{"Seedance2.0", "Wan2.7-T2V", "HappyHorse-1.0-T2V"} {
		name, e, known := c.Lookup(m)
		if !known || name != m {
			t.Fatalf("Lookup(%q) = %q, known %v", m, name, known)
		}
		for _, in := range []string{"720p", "1080P", "720P"} {
			if r, ok := e.Resolution(in); !ok || strings.ToLower(in) != r {
				t.Errorf("%s: Resolution(%q) = %q, %v; want the platform's spelling", m, in, r, ok)
			}
		}
		if e.Durations != (Durations{4, 15}) {
			t.Errorf("%s: durations %+v, want 4-15", m, e.Durations)
		}
	}
	name, e, known := c.Lookup("video-model-next")
	if known || name != "video-model-next" {
		t.Errorf("unknown model: Lookup = %q, known %v", name, known)
	}
	for _, r := range []string{"768P", "2K", "720p", "1080p"} {
		if _, ok := e.Resolution(r); !ok {
			t.Errorf("default entry refuses %s", r)
		}
	}
	if _, ok := e.Resolution("4K"); ok {
		t.Error("default entry accepts 4K")
	}
	if got := c.PriceRules(); !slices.Equal(got, []string{"video.768P.second", "video.2K.second", "video.720p.second", "video.1080p.second"}) {
		t.Errorf("PriceRules() = %v", got)
	}
	if got := e.RuleFor("1080p"); got != "video.1080p.second" {
		t.Errorf("price rule of 1080p = %q", got)
	}
}

// TestLookupIgnoresCase: a model named in another case is the catalog's
// model, spelled the catalog's way.
func TestLookupIgnoresCase(t *testing.T) {
	t.Parallel()
	name, _, known := Shipped().Lookup("seedance2.0")
	if !known || name != "Seedance2.0" {
		t.Errorf("Lookup(seedance2.0) = %q, %v", name, known)
	}
}

// TestLoadExtends: a file's models join the shipped ones; one naming a
// shipped model replaces its entry; its default replaces the default.
func TestLoadExtends(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `{
  "models": {
    "Studio-X": {"resolutions": ["4K"], "durations": {"min": 5, "max": 30}, "ratios": ["16:9"], "inputs": ["text_to_video"]},
    "seedance2.0": {"resolutions": ["480p"], "durations": {"min": 5, "max": 10}, "ratios": ["16:9"], "inputs": ["text_to_video"]}
  }
}`)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, e, known := c.Lookup("Studio-X"); !known || e.Durations.Max != 30 {
		t.Errorf("Studio-X: known %v, entry %+v", known, e)
	}
	if _, _, known := c.Lookup("Wan2.7-T2V"); !known {
		t.Error("extending dropped a shipped model")
	}
	name, e, _ := c.Lookup("Seedance2.0")
	if name != "seedance2.0" || !slices.Equal(e.Resolutions, []string{"480p"}) {
		t.Errorf("Seedance2.0 not replaced: %q %+v", name, e)
	}
	if _, ok := c.Default.Resolution("4K"); ok {
		t.Error("the default changed though the file has none")
	}
}

// TestLoadReplaces: "replace": true keeps nothing of the shipped catalog
// and needs a default.
func TestLoadReplaces(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `{"replace": true,
 "default": {"resolutions": ["720p"], "durations": {"min": 4, "max": 8}, "ratios": ["16:9"], "inputs": ["text_to_video"]},
 "models": {"Only": {"resolutions": ["1080p"], "durations": {"min": 4, "max": 8}, "ratios": ["16:9"], "inputs": ["text_to_video"]}}}`)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, known := c.Lookup("Seedance2.0"); known {
		t.Error("replace kept a shipped model")
	}
	if got := c.PriceRules(); !slices.Equal(got, []string{"video.720p.second", "video.1080p.second"}) {
		t.Errorf("PriceRules() = %v", got)
	}

	p = writeFile(t, `{"replace": true, "models": {}}`)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "default: required when replace is true") {
		t.Errorf("replace without default: %v", err)
	}
}

// TestLoadNamesTheLine: a file that does not parse, names an unknown
// field or has a value of the wrong type is refused naming its line.
func TestLoadNamesTheLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"syntax", "{\n  \"models\": {\n    \"A\": {,}\n  }\n}", "line 3"},
		{"unknown top field", "{\n  \"replace\": false,\n  \"modles\": {}\n}", `line 3, column 3: unknown field "modles"; did you mean "models"?`},
		{"misspelt entry field", "{\"models\": {\n \"A\": {\n  \"ratio\": [\"16:9\"]\n }\n}}", `line 3, column 3: unknown field "ratio" in models.A; did you mean "ratios"?`},
		{"unknown entry field", "{\"models\": {\n \"A\": {\n  \"resolutions\": [\"720p\"],\n  \"fps\": 24\n }\n}}", `line 4, column 3: unknown field "fps" in models.A`},
		{"wrong type", "{\"models\": {\"A\": {\n\"durations\": {\"min\": \"4\"}}}}", "line 2"},
		{"cut short", "{\"models\": {\n", "cut short"},
		{"not an object", "\n[1]", "line 2, column 1: the catalog must be a JSON object"},
		{"trailing data", "{}\n{}", "line 2, column 1: data after"},
	} {
		_, err := Load(writeFile(t, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// TestLoadRefusesBrokenEntries: an entry that could never accept a
// request is refused naming its field.
func TestLoadRefusesBrokenEntries(t *testing.T) {
	t.Parallel()
	entry := func(fields string) string {
		return `{"models": {"A": {` + fields + `}}}`
	}
	ok := `"ratios": ["16:9"], "inputs": ["text_to_video"]`
	for _, tc := range []struct{ body, want string }{
		{entry(`"resolutions": [], "durations": {"min": 4, "max": 15}, ` + ok), `models["A"].resolutions: must list at least one value`},
		{entry(`"resolutions": ["720p", "720P"], "durations": {"min": 4, "max": 15}, ` + ok), `models["A"].resolutions[1]`},
		{entry(`"resolutions": ["7.2"], "durations": {"min": 4, "max": 15}, ` + ok), `models["A"].resolutions[0]`},
		{entry(`"resolutions": ["720p"], "durations": {"min": 9, "max": 5}, ` + ok), `models["A"].durations.max`},
		{entry(`"resolutions": ["720p"], ` + ok), `models["A"].durations.min`},
		{entry(`"resolutions": ["720p"], "durations": {"min": 4, "max": 15}, "ratios": ["16:9"], "inputs": ["audio"]`), `models["A"].inputs[0]`},
	} {
		_, err := Load(writeFile(t, tc.body))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.body, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join(t.TempDir(), "absent.json")); err == nil {
		t.Error("a missing file loads")
	}
}

// TestEntryPriceRules: a resolution's price rule is video.<resolution>.second
// unless the entry's prices map it to another video.*.second rule, so an
// operator can price one model's 1080p apart from another's.
func TestEntryPriceRules(t *testing.T) {
	t.Parallel()
	p := writeFile(t, `{"models": {"Seedance2.0": {"resolutions": ["720p", "1080p"], "durations": {"min": 4, "max": 15},
  "ratios": ["16:9"], "inputs": ["text_to_video"], "prices": {"1080p": "video.seedance-1080p.second"}}}}`)
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	_, e, _ := c.Lookup("Seedance2.0")
	if got := e.RuleFor("1080p"); got != "video.seedance-1080p.second" {
		t.Errorf("RuleFor(1080p) = %q", got)
	}
	if got := e.RuleFor("720p"); got != "video.720p.second" {
		t.Errorf("RuleFor(720p) = %q", got)
	}
	rules := c.PriceRules()
	for _, want := range []string{"video.768P.second", "video.1080p.second", "video.seedance-1080p.second"} {
		if !slices.Contains(rules, want) {
			t.Errorf("PriceRules() = %v, want %s among them", rules, want)
		}
	}
	for _, tc := range []struct{ prices, want string }{
		{`{"4K": "video.4K.second"}`, `models["A"].prices["4K"]: names no resolution of the entry`},
		{`{"720p": "speech.char"}`, `models["A"].prices["720p"]: must be a rule video.<name>.second`},
		{`{"720p": "video..second"}`, `models["A"].prices["720p"]: must be a rule video.<name>.second`},
	} {
		body := `{"models": {"A": {"resolutions": ["720p"], "durations": {"min": 4, "max": 15}, "ratios": ["16:9"], "inputs": ["text_to_video"], "prices": ` + tc.prices + `}}}`
		if _, err := Load(writeFile(t, body)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("prices %s: err = %v, want %q", tc.prices, err, tc.want)
		}
	}
}
