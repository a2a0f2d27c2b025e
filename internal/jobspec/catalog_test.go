package jobspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/models"
)

// problemAt returns the rule err reports at path, "" when none.
func problemAt(err error, path string) string {
	var se *Error
	if !errors.As(err, &se) {
		return ""
	}
	for _, p := range se.Problems {
		if p.Path == path {
			return p.Rule
		}
	}
	return ""
}

// TestVideoModelsOfPublicClients: the requests public clients send (the
// three models, 720p/1080p in any case, 4-15 s) pass, and the resolution
// is kept in the platform's spelling.
func TestVideoModelsOfPublicClients(t *testing.T) {
	t.Parallel()
	base := string(readExample(t, "text-to-video"))
	for _, model := range []string{"Seedance2.0", "Wan2.7-T2V", "HappyHorse-1.0-T2V"} {
		for _, res := range []string{"720p", "1080p", "720P", "1080P"} {
			for _, dur := range []int{4, 5, 15} {
				doc := mutate(base, set("video.model", model), set("video.parameters.resolution", res), set("video.parameters.duration", dur))
				spec, err := Decode([]byte(doc), KindVideo)
				if err != nil {
					t.Fatalf("%s %s %ds: %v", model, res, dur, err)
				}
				if got, want := spec.Video.Parameters.Resolution, strings.ToLower(res); got != want {
					t.Errorf("%s %s: resolution %q, want the platform's spelling %q", model, res, got, want)
				}
			}
		}
	}
}

// TestVideoCatalogRefusesUnseenValues: 4K and 30 s are refused for a
// known model and for one the catalog does not know, naming the field.
func TestVideoCatalogRefusesUnseenValues(t *testing.T) {
	t.Parallel()
	base := string(readExample(t, "text-to-video"))
	for _, model := range []string{"Seedance2.0", "video-model-next"} {
		_, err := Decode([]byte(mutate(base, set("video.model", model), set("video.parameters.resolution", "4K"))), KindVideo)
		if rule := problemAt(err, "video.parameters.resolution"); !strings.Contains(rule, `got "4K"`) {
			t.Errorf("%s 4K: err = %v", model, err)
		}
		_, err = Decode([]byte(mutate(base, set("video.model", model), set("video.parameters.duration", 30))), KindVideo)
		if rule := problemAt(err, "video.parameters.duration"); !strings.Contains(rule, "[4, 15]") {
			t.Errorf("%s 30 s: err = %v", model, err)
		}
	}
	// A known model keeps to its own entry, and the refusal names it.
	_, err := Decode([]byte(mutate(base, set("video.model", "Seedance2.0"), set("video.parameters.resolution", "4K"))), KindVideo)
	if rule := problemAt(err, "video.parameters.resolution"); !strings.Contains(rule, "(model Seedance2.0)") {
		t.Errorf("Seedance2.0 4K: err = %v", err)
	}
}

// TestVideoModelsOfClientsTakeTheDocumentsResolutions: the three models
// public clients use take the document's 768P and 2K besides 720p and
// 1080p: nothing shows the platform refuses them, the media simulator
// (which stands for the platform) takes them, a refused request is a
// free 400, and specs at 768P/2K passed before the catalog existed.
func TestVideoModelsOfClientsTakeTheDocumentsResolutions(t *testing.T) {
	t.Parallel()
	base := string(readExample(t, "text-to-video"))
	for _, model := range []string{"Seedance2.0", "Wan2.7-T2V", "HappyHorse-1.0-T2V"} {
		for _, res := range []string{"768P", "2K", "2k"} {
			spec, err := Decode([]byte(mutate(base, set("video.model", model), set("video.parameters.resolution", res))), KindVideo)
			if err != nil {
				t.Errorf("%s %s: %v", model, res, err)
				continue
			}
			if got := spec.Video.Parameters.Resolution; got != strings.ToUpper(res) {
				t.Errorf("%s %s: sent as %q, want the document's spelling", model, res, got)
			}
		}
	}
}

// TestVideoUnknownModelUsesDefault: a model the catalog does not name is
// checked against the default entry (documented and observed values).
func TestVideoUnknownModelUsesDefault(t *testing.T) {
	t.Parallel()
	base := string(readExample(t, "text-to-video"))
	for _, res := range []string{"768P", "2K", "720p", "1080P"} {
		spec, err := Decode([]byte(mutate(base, set("video.model", "video-model-next"), set("video.parameters.resolution", res))), KindVideo)
		if err != nil {
			t.Errorf("%s: %v", res, err)
			continue
		}
		if spec.Video.ModelKnown(models.Shipped()) {
			t.Error("video-model-next reported known")
		}
	}
}

// TestVideoOperatorCatalog: DecodeWith and ValidateWith check against the
// catalog given: an operator's model with 4K and 30 s passes, a model
// that takes only text refuses a first frame, naming the field.
func TestVideoOperatorCatalog(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "models.json")
	body := `{"models": {"Studio-X": {"resolutions": ["4K"], "durations": {"min": 5, "max": 30},
		"ratios": ["16:9", "adaptive"], "inputs": ["text_to_video"]}}}`
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cat, err := models.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	base := string(readExample(t, "text-to-video"))
	doc := mutate(base, set("video.model", "studio-x"), set("video.parameters.resolution", "4k"), set("video.parameters.duration", 30))
	spec, err := DecodeWith([]byte(doc), KindVideo, cat)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Video.Model != "Studio-X" || spec.Video.Parameters.Resolution != "4K" {
		t.Errorf("sent as model %q resolution %q, want the catalog's spelling", spec.Video.Model, spec.Video.Parameters.Resolution)
	}
	if !spec.Video.ModelKnown(cat) {
		t.Error("Studio-X not known")
	}
	if _, err := Decode([]byte(doc), KindVideo); problemAt(err, "video.parameters.resolution") == "" {
		t.Errorf("the shipped catalog accepts 4K: %v", err)
	}
	if err := spec.ValidateWith(cat); err != nil {
		t.Errorf("ValidateWith: %v", err)
	}

	first := string(readExample(t, "image-to-video-first-frame"))
	doc = mutate(first, set("video.model", "Studio-X"), set("video.parameters.resolution", "4K"), set("video.parameters.duration", 5))
	_, err = DecodeWith([]byte(doc), KindVideo, cat)
	if rule := problemAt(err, "video.input.media"); !strings.Contains(rule, "image_to_video") {
		t.Errorf("first frame to a text-only model: err = %v", err)
	}
}
