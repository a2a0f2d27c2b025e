package apisim_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// TestMediaModelsOfThePlatform: like the platform (platform-evidence.md
// section 6), the simulator takes the three models public clients use at
// 720p/1080p, and every model at the document's 768P/2K; in Letter mode
// only 768P/2K. Neither takes 4K, a resolution spelled otherwise than the
// platform does, or 720p for a model not seen with it.
func TestMediaModelsOfThePlatform(t *testing.T) {
	t.Parallel()
	platform := setupSim(t, apisim.MediaConfig{})
	letter := setupSim(t, apisim.MediaConfig{Letter: true})
	body := func(model, res string) string {
		return `{"model":"` + model + `","input":{"prompt":"p"},"parameters":{"resolution":"` + res + `","duration":5,"ratio":"16:9"}}`
	}
	for _, tt := range []struct {
		model, res        string
		platform, letterS int
	}{
		{"Seedance2.0", "720p", 200, 400},
		{"Wan2.7-T2V", "1080p", 200, 400},
		{"HappyHorse-1.0-T2V", "720p", 200, 400},
		{"HappyHorse-1.0-T2V", "768P", 200, 200},
		{"video-model", "2K", 200, 200},
		{"video-model", "720p", 400, 400},
		{"Seedance2.0", "720P", 400, 400},
		{"Seedance2.0", "4K", 400, 400},
	} {
		for _, side := range []struct {
			b    *simBundle
			want int
		}{{platform, tt.platform}, {letter, tt.letterS}} {
			a := side.b.call(t, "POST", "/api/llm/v1/videos/generations", body(tt.model, tt.res), asyncHdr)
			if a.status != side.want {
				t.Errorf("%s %s (letter %v): status %d, want %d: %s", tt.model, tt.res, side.b == letter, a.status, side.want, a.body)
				continue
			}
			if a.status == 400 {
				if e := decode[errJSON](t, a); e.Error.Param == nil || *e.Error.Param != "parameters.resolution" {
					t.Errorf("%s %s: %s, want param parameters.resolution", tt.model, tt.res, a.body)
				}
			}
		}
	}
}
