package cli

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

// TestTenantAndPriorityFlags: every flag-built command takes --tenant and
// --priority into its spec, and a priority out of range is reported on
// --priority.
func TestTenantAndPriorityFlags(t *testing.T) {
	b := setupLocal(t)
	for kind, args := range map[jobspec.Kind][]string{
		jobspec.KindVideo:  {"video", "--model", "m", "--prompt", "p", "--resolution", "768P", "--duration", "5", "--ratio", "16:9"},
		jobspec.KindSpeech: {"speech", "--model", "m", "--text", "hello", "--voice", "v"},
		jobspec.KindCompute: {"compute", "--template", "BASIC/BASE", "--queue", "normal", "--nodes", "1", "--ppn", "4",
			"--wall-time", "01:00:00", "--script", "/home/alice/run.sh"},
		jobspec.KindContainer: {"container", "--image", "registry:5000/gpu/admin/base/torch:2.1", "--version", "torch:2.1",
			"--accelerator", "gpu", "--resource-group", "TeslaM40", "--cpus", "4", "--gpus", "1", "--ram-mb", "16384",
			"--instance-timeout", "02:00:00", "--script", "echo hi"},
	} {
		code, stdout, stderr := b.enqueue(t, false, append(args, "--tenant", "acme", "--priority", "1", "--dry-run")...)
		if code != 0 {
			t.Errorf("%s: exit %d: %s", kind, code, stderr)
			continue
		}
		spec, err := jobspec.Decode([]byte(strings.TrimSpace(stdout)), kind)
		if err != nil || spec.Tenant != "acme" || spec.Priority != 1 {
			t.Errorf("%s: spec tenant %q priority %d (%v), want acme and 1:\n%s", kind, spec.Tenant, spec.Priority, err, stdout)
		}
		code, _, stderr = b.enqueue(t, false, append(args, "--priority", "9", "--dry-run")...)
		if code != 2 || !strings.Contains(stderr, "--priority") {
			t.Errorf("%s --priority 9: exit %d, want 2 naming --priority: %s", kind, code, stderr)
		}
	}
}
