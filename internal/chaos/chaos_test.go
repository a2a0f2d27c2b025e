package chaos_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/chaos"
)

// TestChaos is the short run of the reliability scenario (make chaos runs
// the long one): 200 jobs, 3 worker processes with one killed every 2s,
// one NATS restart, a 10s S3 outage and a failing, rate-limiting upstream.
// It passes only when every promise held; its figures are the last line
// of its log.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run takes a minute or two")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := chaos.BuildWorker(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	progress := &lineLogger{t: t}
	rep, err := chaos.Run(ctx, chaos.Config{
		Dir: dir, WorkerBin: bin, Jobs: 200, Seed: uint64(time.Now().UnixNano()),
		// A loaded machine may be slow: stuck means "not finished in
		// publishing time + 4 minutes", not a timing.
		Deadline: 25*time.Second + 4*time.Minute,
		Progress: progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		t.Error(p)
	}
	if rep.Lost != 0 || rep.Stuck != 0 || rep.MultiTerminal != 0 || rep.BadArtifacts != 0 || rep.Unexplained != 0 || rep.Leaks != 0 {
		t.Errorf("broken promises: %s", rep)
	}
	if rep.Kills == 0 || rep.Restarts == 0 || rep.Faults[chaos.FaultNATSRestart] != 1 || rep.Faults[chaos.FaultS3Outage] != 1 {
		t.Errorf("the faults did not all happen: %s", rep)
	}
	if rep.Succeeded+rep.Failed != rep.Jobs {
		t.Errorf("%d succeeded + %d failed of %d jobs", rep.Succeeded, rep.Failed, rep.Jobs)
	}
	if t.Failed() {
		logWorkerTails(t, filepath.Join(dir, "logs"))
		logJobLines(t, filepath.Join(dir, "logs"), rep.StuckIDs)
	}
	t.Log(rep)
}

// lineLogger writes each line it receives to the test log.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line)
			return len(p), nil
		}
		l.t.Log(strings.TrimRight(line, "\n"))
	}
}

// logJobLines logs, for each of ids (the stuck jobs of a failed run),
// the worker-log lines that name it and the quota lines near it: where
// each delivery of the job stopped, and whether the worker could write
// the fleet's quota board meanwhile.
func logJobLines(t *testing.T, dir string, ids []string) {
	if len(ids) == 0 {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var lines []string
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, `"quota"`) || slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(line, `"`+id+`"`) }) {
				lines = append(lines, strings.TrimRight(line, "\n"))
			}
		}
		if len(lines) > 200 {
			lines = append(lines[:100:100], append([]string{"..."}, lines[len(lines)-100:]...)...)
		}
		t.Logf("%s: the lines naming %s or the quota:\n%s", filepath.Base(p), strings.Join(ids, ", "), strings.Join(lines, "\n"))
	}
}

// logWorkerTails logs the end of every worker log of a failed run.
func logWorkerTails(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, p := range logs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		t.Logf("%s (last 8 KiB):\n%s", filepath.Base(p), b[max(0, len(b)-8<<10):])
	}
}
