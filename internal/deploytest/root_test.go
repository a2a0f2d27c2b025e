package deploytest

import (
	"os"
	"path/filepath"
	"testing"
)

// repoRoot is the repository's top directory: two levels above this
// package, where the main module's go.mod is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("repository root not found above %s: %v", root, err)
	}
	return root
}
