package containertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCompose is a compose command that logs every call and answers ps -q
// with one container, and fakeDocker a docker whose containers are all
// healthy: images/compose.sh runs without an engine.
const (
	fakeCompose = `#!/bin/sh
echo "$*" >>"$FAKE_LOG"
case " $* " in *" ps -q "*) echo c1 ;; esac
`
	fakeDocker = `#!/bin/sh
echo healthy
`
)

// TestComposeShUpPassesArguments: what follows `images/compose.sh up` (a
// service, flags) reaches compose up, -d is implied, and without a service
// the stack's own services start.
func TestComposeShUpPassesArguments(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"compose": fakeCompose, "docker": fakeDocker} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"up"}, "up -d --scale worker=1 simulator worker"},
		{[]string{"up", "-d", "console"}, "up -d --scale worker=1 console"},
		{[]string{"up", "--build"}, "up -d --scale worker=1 --build simulator worker"},
	}
	for _, tt := range tests {
		log := filepath.Join(dir, strings.Join(tt.args, "_")+".log")
		cmd := exec.Command("bash", append([]string{"images/compose.sh"}, tt.args...)...)
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "COMPOSE="+filepath.Join(dir, "compose"), "FAKE_LOG="+log,
			"PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "SLUICE_STACK=single", "WORKERS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("images/compose.sh %s: %v\n%s", strings.Join(tt.args, " "), err, out)
		}
		calls, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		var up string
		for _, c := range strings.Split(string(calls), "\n") {
			if _, after, ok := strings.Cut(c, "--profile console "); ok && strings.HasPrefix(after, "up ") {
				up = after
			}
		}
		if up != tt.want {
			t.Errorf("images/compose.sh %s ran compose %q, want %q\n(calls: %s)", strings.Join(tt.args, " "), up, tt.want, calls)
		}
	}
}
