package deploytest

import (
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sluice-dev/sluice/internal/models"
)

// studioX is an operator's catalog file: a model the shipped catalog does
// not have, at a resolution and length it refuses.
const studioX = `{
  "models": {
    "Studio-X": {"resolutions": ["4K"], "durations": {"min": 5, "max": 30},
                 "ratios": ["16:9"], "inputs": ["text_to_video"]}
  }
}
`

// valuesFile writes a values file into a temporary directory.
func valuesFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChartMountsModelCatalog: modelCatalog, given as the file's JSON text
// or as an object, is rendered into a ConfigMap mounted read-only in the
// worker and named by SLUICE_MEDIA_MODELS; the mounted file is a catalog
// the worker loads, with the operator's model; a changed catalog changes
// the pod template, so the workers restart and read it. Without it, no
// catalog is mounted or named.
func TestChartMountsModelCatalog(t *testing.T) {
	plain := render(t)
	if _, ok := plain.environment(t)["SLUICE_MEDIA_MODELS"]; ok || plain.models != nil {
		t.Errorf("defaults: SLUICE_MEDIA_MODELS set or a catalog ConfigMap rendered")
	}

	text := "modelCatalog: |\n" + indent(studioX, "  ")
	object := `modelCatalog:
  models:
    Studio-X:
      resolutions: [4K]
      durations: {min: 5, max: 30}
      ratios: ["16:9"]
      inputs: [text_to_video]
`
	var sums []string
	for name, values := range map[string]string{"text": text, "object": object} {
		t.Run(name, func(t *testing.T) {
			f := valuesFile(t, values)
			if out, err := helm(t, "lint", "--strict", chartDir, "-f", f); err != nil {
				t.Fatalf("helm lint --strict: %v\n%s", err, out)
			}
			r := render(t, "-f", f)
			r.checkWorker(t)
			r.checkWiring(t)
			data := r.mountedCatalog(t)
			if name == "text" && data != studioX {
				t.Errorf("the mounted file differs from the JSON given (its line numbers would not match):\n%s", data)
			}
			p := filepath.Join(t.TempDir(), "models.json")
			if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
			cat, err := models.Load(p)
			if err != nil {
				t.Fatalf("the worker refuses the mounted catalog: %v\n%s", err, data)
			}
			if e, ok := cat.Models["Studio-X"]; !ok || e.Resolutions[0] != "4K" || e.Durations.Max != 30 {
				t.Errorf("Studio-X = %+v, %v", e, ok)
			}
			if _, ok := cat.Models["Seedance2.0"]; !ok {
				t.Error("the file should extend the shipped catalog")
			}
		})
	}
	for _, catalog := range []string{studioX, strings.Replace(studioX, "30", "60", 1)} {
		r := render(t, "-f", valuesFile(t, "modelCatalog: |\n"+indent(catalog, "  ")))
		sums = append(sums, r.deployment.Spec.Template.Annotations["checksum/models"])
	}
	if sums[0] == "" || sums[0] == sums[1] {
		t.Errorf("pod template checksum/models %q then %q: a changed catalog must roll the workers", sums[0], sums[1])
	}

	for _, tc := range []struct{ values, want string }{
		{"modelCatalog: '{\"models\": '\n", "modelCatalog"},
		{"modelCatalog: '[1]'\n", "modelCatalog"},
		{text + "env:\n  SLUICE_MEDIA_MODELS: /etc/other.json\n", "SLUICE_MEDIA_MODELS"},
	} {
		out, err := helm(t, "template", "sluice", chartDir, "-f", valuesFile(t, tc.values))
		switch {
		case err == nil:
			t.Errorf("%q rendered; want a refusal", tc.values)
		case !strings.Contains(out, tc.want):
			t.Errorf("%q refused without naming %s:\n%s", tc.values, tc.want, out)
		}
	}
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

// mountedCatalog returns the text of the file SLUICE_MEDIA_MODELS names,
// as the worker's container sees it: a key of the catalog ConfigMap,
// mounted read-only.
func (r *rendered) mountedCatalog(t *testing.T) string {
	t.Helper()
	file := r.environment(t)["SLUICE_MEDIA_MODELS"]
	if file == "" || r.models == nil {
		t.Fatalf("SLUICE_MEDIA_MODELS %q, catalog ConfigMap rendered %v", file, r.models != nil)
	}
	spec := r.deployment.Spec.Template.Spec
	for _, m := range r.container(t).VolumeMounts {
		rel, ok := strings.CutPrefix(file, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		if !m.ReadOnly {
			t.Errorf("the catalog's volume %s is mounted writable", m.Name)
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && v.ConfigMap.Name == r.models.Name {
				return r.models.Data[configMapKey(v.ConfigMap, rel)]
			}
		}
	}
	t.Fatalf("SLUICE_MEDIA_MODELS=%s is in no volume mounted from the catalog ConfigMap %s", file, r.models.Name)
	return ""
}

// configMapKey is the key of the ConfigMap volume src that the file rel
// (relative to the mount) shows.
func configMapKey(src *corev1.ConfigMapVolumeSource, rel string) string {
	for _, it := range src.Items {
		if path.Clean(it.Path) == rel {
			return it.Key
		}
	}
	return rel
}
