package demo_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
)

// TestDemo runs the whole demo: it passes only when every scenario ends as
// expected and every artifact reads back with its sha256. Without a data
// directory the demo uses a temporary one and removes it at the end.
func TestDemo(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	var out bytes.Buffer
	err := demo.Run(context.Background(), &out, demo.Options{TaskTime: 500 * time.Millisecond, Timeout: 2 * time.Minute})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "sluice-demo-*")); len(left) > 0 {
		t.Errorf("the demo left %v behind", left)
	}
	if !strings.Contains(out.String(), "removed at the end") {
		t.Error("the demo does not say its files are removed")
	}
	for _, want := range []string{"demo-speech-stream", "demo-compute", "demo/compute/demo-compute/result.dat",
		"demo-container", "demo/container/demo-container/model.bin", "all 10 jobs ended as expected",
		"container instances left alive: none (1 container job(s) checked in the simulator)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
