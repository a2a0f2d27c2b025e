package runner

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/state"
)

// TestFindArtifactExactNameFirst: a compute step whose outputs are
// a.tar.gz and a.tar feeds a reference to a.tar with a.tar, not with
// a.tar.gz (whose name without extension is a.tar too), whatever their
// order.
func TestFindArtifactExactNameFirst(t *testing.T) {
	arts := []state.Artifact{{Key: "p/stdout.txt"}, {Key: "p/a.tar.gz"}, {Key: "p/a.tar"}, {Key: "p/result-0.mp3"}}
	for name, want := range map[string]string{"a.tar": "p/a.tar", "a.tar.gz": "p/a.tar.gz", "result-0": "p/result-0.mp3", "stdout.txt": "p/stdout.txt"} {
		if a, ok := findArtifact(arts, name); !ok || a.Key != want {
			t.Errorf("findArtifact(%q) = %q %v, want %q", name, a.Key, ok, want)
		}
	}
}
