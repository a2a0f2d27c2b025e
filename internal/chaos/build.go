package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildWorker builds cmd/worker into dir with the go command, with the
// build tags given (faults, for Config.ClockOffsets), and returns the
// binary's path.
func BuildWorker(ctx context.Context, dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "worker")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.CommandContext(ctx, "go", append(args, "github.com/sluice-dev/sluice/cmd/worker")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build worker: %w\n%s", err, out)
	}
	return bin, nil
}
