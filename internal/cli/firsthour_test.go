package cli

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// runCLI runs enqueue with args and no environment.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	env := Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errs,
		Getenv:     func(string) string { return "" },
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now, Rand: strings.NewReader(strings.Repeat("x", 64)),
	}
	code = Run(testenv.Context(t, 30*time.Second), args, env)
	return code, out.String(), errs.String()
}

// TestFirstMistakes: what a new user types first gets a usage error (exit
// 2) that says what is wrong, flags written with two dashes.
func TestFirstMistakes(t *testing.T) {
	dir := t.TempDir()
	oneDash := regexp.MustCompile(`(flag|defined:|argument:) -[a-z]`)
	tests := []struct {
		args []string
		want []string
	}{
		// A global flag before the command is the command's flag.
		{[]string{"--nats-url", "http://127.0.0.1:4222", "status", "x"}, []string{"--nats-url", "http://", "nats://"}},
		{[]string{"status", "x", "--nats-url", "http://127.0.0.1:4222"}, []string{"--nats-url", "http://", "nats://"}},
		{[]string{"jobs", "--since", "3"}, []string{"--since", "24h"}},
		{[]string{"video", "--tenantt", "a"}, []string{"-tenantt", "did you mean --tenant"}},
		{[]string{"submit", "-f", dir}, []string{dir, "directory"}},
	}
	for _, tt := range tests {
		code, _, stderr := runCLI(t, tt.args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want %d: %s", tt.args, code, ExitUsage, stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: stderr %q lacks %q", tt.args, stderr, w)
			}
		}
		if oneDash.MatchString(stderr) {
			t.Errorf("%v: a flag with one dash: %s", tt.args, stderr)
		}
	}
	truncated := filepath.Join(dir, "t.json")
	if err := os.WriteFile(truncated, []byte(`{"id":"a","kind":"video"`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "submit", "-f", truncated, "--dry-run")
	if code != ExitUsage || !strings.Contains(stderr, "unexpected end of input") {
		t.Errorf("truncated spec: exit %d: %s", code, stderr)
	}
}

// TestEmptyScriptFileOneWording: an empty --script-file is reported the
// same way by compute and container, naming the file.
func TestEmptyScriptFileOneWording(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.sh")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"compute", "--template", "BASIC/BASE", "--queue", "normal", "--nodes", "1", "--ppn", "1", "--wall-time", "00:10:00",
			"--script-file", empty, "--work-dir", "/x", "--dry-run"},
		{"container", "--image", "i", "--version", "v", "--accelerator", "gpu", "--resource-group", "g", "--cpus", "1",
			"--gpus", "1", "--ram-mb", "1", "--instance-timeout", "00:10:00", "--script-file", empty, "--dry-run"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != ExitUsage || !strings.Contains(stderr, "--script-file "+empty+": the file is empty") {
			t.Errorf("%s: exit %d: %s", args[0], code, stderr)
		}
	}
}
