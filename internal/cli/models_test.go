package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// runCLIWith runs enqueue with the environment env.
func runCLIWith(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	e := Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs,
		Getenv:     func(k string) string { return env[k] },
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now, Rand: strings.NewReader(strings.Repeat("x", 64)),
	}
	code = Run(testenv.Context(t, 30*time.Second), args, e)
	return code, out.String(), errs.String()
}

// TestVideoFlagsFollowTheCatalog: enqueue video checks its flags against
// the model catalog as a worker does: a public client's request passes,
// 4K and 30 s are refused naming the flag, an unknown model is warned of,
// and SLUICE_MEDIA_MODELS in enqueue's environment extends the catalog
// (a bad file is a usage error naming its line).
func TestVideoFlagsFollowTheCatalog(t *testing.T) {
	t.Parallel()
	video := func(model, res, dur string) []string {
		return []string{"video", "--model", model, "--prompt", "a boat", "--resolution", res, "--duration", dur, "--ratio", "16:9", "--id", "c-1", "--dry-run"}
	}
	if code, _, stderr := runCLIWith(t, nil, video("Seedance2.0", "720P", "5")...); code != ExitOK {
		t.Errorf("Seedance2.0 720P: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct{ res, dur, want string }{
		{"4K", "5", "--resolution (video.parameters.resolution)"},
		{"1080p", "30", "--duration (video.parameters.duration)"},
	} {
		code, _, stderr := runCLIWith(t, nil, video("HappyHorse-1.0-T2V", tc.res, tc.dur)...)
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s %s s: exit %d, stderr %q; want exit 2 naming %q", tc.res, tc.dur, code, stderr, tc.want)
		}
	}
	code, _, stderr := runCLIWith(t, nil, video("video-model-next", "2K", "5")...)
	if code != ExitOK || !strings.Contains(stderr, `video model "video-model-next" is not in the model catalog`) {
		t.Errorf("unknown model: exit %d, stderr %q; want exit 0 and a warning", code, stderr)
	}

	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"models": {"Studio-X": {"resolutions": ["4K"], "durations": {"min": 5, "max": 30}, "ratios": ["16:9"], "inputs": ["text_to_video"]}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("{\n\"models\": {},\n\"extra\": 1}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLIWith(t, map[string]string{"SLUICE_MEDIA_MODELS": good}, video("Studio-X", "4K", "30")...); code != ExitOK || strings.Contains(stderr, "warning") {
		t.Errorf("Studio-X 4K 30 s with the operator's file: exit %d: %s", code, stderr)
	}
	code, _, stderr = runCLIWith(t, map[string]string{"SLUICE_MEDIA_MODELS": bad}, video("Seedance2.0", "720p", "5")...)
	if code != ExitUsage || !strings.Contains(stderr, "SLUICE_MEDIA_MODELS") || !strings.Contains(stderr, "line 3") {
		t.Errorf("bad catalog file: exit %d, stderr %q; want exit 2 naming the variable and line 3", code, stderr)
	}
}
