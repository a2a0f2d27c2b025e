package demo_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
)

// TestDemo runs the whole demo: it passes only when every scenario ends as
// expected and every artifact reads back with its sha256.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	err := demo.Run(context.Background(), &out, demo.Options{DataDir: t.TempDir(), TaskTime: 500 * time.Millisecond, Timeout: 2 * time.Minute})
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"demo-speech-stream", "demo-compute", "demo/compute/demo-compute/result.dat", "all 9 jobs ended as expected"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
