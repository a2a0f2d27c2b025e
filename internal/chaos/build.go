package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
)

// BuildWorker builds cmd/worker into dir with the go command and returns the
// binary's path.
func BuildWorker(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "worker")
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sluice-dev/sluice/cmd/worker").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build worker: %w\n%s", err, out)
	}
	return bin, nil
}
