package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/models"
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

// TestPublishChecksThePublishedCatalog: enqueue video and enqueue submit,
// which connect to NATS to publish, check specs against the catalog the
// workers published in SLUICE_TENANTS: a model an operator added on the
// workers only is taken, and a value their catalog no longer takes is
// refused before anything is published, whatever enqueue's own
// environment says. With nothing published they fall back to
// SLUICE_MEDIA_MODELS in enqueue's environment; --dry-run, which does not
// connect, checks against it too.
func TestPublishChecksThePublishedCatalog(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 60*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	workers := filepath.Join(dir, "workers.json")
	body := `{"models": {"Studio-X": {"resolutions": ["4K"], "durations": {"min": 5, "max": 30}, "ratios": ["16:9"], "inputs": ["text_to_video"]},
	  "Seedance2.0": {"resolutions": ["720p"], "durations": {"min": 4, "max": 15}, "ratios": ["16:9"], "inputs": ["text_to_video"]}}}`
	if err := os.WriteFile(workers, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"SLUICE_NATS_URL": n.URL}
	video := func(id, model, res, dur string, more ...string) []string {
		return append([]string{"video", "--model", model, "--prompt", "a boat", "--resolution", res, "--duration", dur, "--ratio", "16:9", "--id", id}, more...)
	}

	// Nothing published: SLUICE_MEDIA_MODELS in enqueue's environment.
	if code, _, stderr := runCLIWith(t, map[string]string{"SLUICE_NATS_URL": n.URL, "SLUICE_MEDIA_MODELS": workers}, video("local-x", "Studio-X", "4K", "30")...); code != ExitOK || strings.Contains(stderr, "warning") {
		t.Errorf("Studio-X 4K, nothing published, enqueue's own file: exit %d: %s", code, stderr)
	}

	cat, err := models.Load(workers)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := json.Marshal(models.Published{Catalog: cat, Source: models.SourceFile, File: "/etc/sluice/models/models.json", Worker: "w-1", WrittenAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.TenantsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, models.Key, pub); err != nil {
		t.Fatal(err)
	}

	if code, _, stderr := runCLIWith(t, env, video("pub-x", "Studio-X", "4K", "30")...); code != ExitOK || strings.Contains(stderr, "warning") {
		t.Errorf("enqueue video Studio-X 4K 30 s under the workers' catalog: exit %d: %s", code, stderr)
	}
	spec := filepath.Join(dir, "spec.json")
	doc := `{"id":"pub-x-file","kind":"video","video":{"model":"Studio-X","input":{"prompt":"p"},"parameters":{"resolution":"4K","duration":20,"ratio":"16:9"}}}`
	if err := os.WriteFile(spec, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLIWith(t, env, "submit", "-f", spec); code != ExitOK {
		t.Errorf("enqueue submit Studio-X 4K under the workers' catalog: exit %d: %s", code, stderr)
	}
	code, _, stderr := runCLIWith(t, env, video("pub-1080", "Seedance2.0", "1080p", "5")...)
	if code != ExitUsage || !strings.Contains(stderr, "--resolution (video.parameters.resolution)") {
		t.Errorf("Seedance2.0 1080p, which the workers' catalog no longer takes: exit %d, stderr %q; want exit 2 naming --resolution", code, stderr)
	}
	// The published catalog wins over enqueue's own environment.
	shippedOnly := filepath.Join(dir, "shipped.json")
	if err := os.WriteFile(shippedOnly, []byte(`{"models": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLIWith(t, map[string]string{"SLUICE_NATS_URL": n.URL, "SLUICE_MEDIA_MODELS": shippedOnly}, video("pub-x-2", "Studio-X", "4K", "30")...); code != ExitOK {
		t.Errorf("Studio-X 4K with another file in enqueue's environment: exit %d: %s", code, stderr)
	}
	// --dry-run does not connect: enqueue's environment, here none.
	if code, _, _ := runCLIWith(t, env, video("dry-x", "Studio-X", "4K", "30", "--dry-run")...); code != ExitUsage {
		t.Errorf("--dry-run Studio-X 4K with the shipped catalog: exit %d, want 2", code)
	}
	// A published catalog that does not decode is warned of; enqueue's
	// own catalog checks the spec, which is published.
	if _, err := kv.Put(ctx, models.Key, []byte(`{"catalog": {"models": {"X": {"fps": 24}}}}`)); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLIWith(t, env, video("garbled", "Seedance2.0", "720p", "5")...)
	if code != ExitOK || !strings.Contains(stderr, "cannot read the model catalog the workers published") {
		t.Errorf("unreadable published catalog: exit %d, stderr %q; want exit 0 and a warning", code, stderr)
	}
	info, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != 5 {
		t.Errorf("SLUICE_JOBS holds %d messages, want the 5 accepted jobs", got)
	}
}
