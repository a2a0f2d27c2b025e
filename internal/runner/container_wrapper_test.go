package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestContainerWrapperRunsInBash runs the start script with the local bash:
// a script that exits 3 leaves 3 as its exit status, its stdout and
// stderr in their files, and a script holding the here-document's
// delimiter and shell syntax runs unexpanded.
func TestContainerWrapperRunsInBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, c := range []struct {
		name, script, stdout, stderr, exit string
	}{
		{"exit 3", "echo out\necho err >&2\nexit 3", "out\n", "err\n", "3\n"},
		{"success", "echo \"$HOME-free $((1+1))\"\n", "", "", "0\n"},
		{"tricky", "cat <<'X'\nSLUICE_SCRIPT_\nX\necho 'a'\"b\" `echo c`\n", "SLUICE_SCRIPT_\nab c\n", "", "0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "work dir")
			w := ContainerStartScript("job-1", dir, c.script)
			if out, err := exec.Command(bash, "-c", w).CombinedOutput(); err != nil {
				t.Fatalf("wrapper: %v: %s", err, out)
			}
			f := filesOf(dir, "job-1")
			read := func(p string) string {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				return string(b)
			}
			if got := read(f.exit); got != c.exit {
				t.Errorf("exit status = %q, want %q", got, c.exit)
			}
			if c.stdout != "" && read(f.stdout) != c.stdout {
				t.Errorf("stdout = %q, want %q", read(f.stdout), c.stdout)
			}
			if read(f.stderr) != c.stderr {
				t.Errorf("stderr = %q, want %q", read(f.stderr), c.stderr)
			}
			if _, err := os.Stat(f.exit + ".tmp"); !os.IsNotExist(err) {
				t.Errorf("temporary exit status left behind")
			}
			if !strings.Contains(w, "SLUICE_WORK_DIR='"+dir+"'") {
				t.Errorf("wrapper does not name the work dir")
			}
		})
	}
}
