package worker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var shBlock = regexp.MustCompile("(?s)```sh\\n(.*?)```")

// walkthrough returns the shell blocks of docs/producing.md's "With the
// NATS CLI" section, except the one installing the CLI.
func walkthrough(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "producing.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## With the NATS CLI\n")
	if !ok {
		t.Fatal(`docs/producing.md has no "## With the NATS CLI" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for _, m := range shBlock.FindAllStringSubmatch(section, -1) {
		if !strings.Contains(m[1], "go install") {
			blocks = append(blocks, m[1])
		}
	}
	if len(blocks) < 4 {
		t.Fatalf("found %d command blocks in the NATS CLI section, want at least 4", len(blocks))
	}
	return blocks
}

// TestNATSCLIWalkthrough runs the NATS CLI commands of docs/producing.md
// verbatim against a real worker whose store already holds another video
// job's events: the spec is published unrendered and once, its own event
// is read from the stream, its record from the bucket, and
// a dead letter with its headers.
func TestNATSCLIWalkthrough(t *testing.T) {
	t.Parallel()
	blocks := walkthrough(t)
	if _, err := exec.LookPath("nats"); err != nil {
		t.Skip("the NATS CLI (nats) is not on PATH; .ci/run installs it with go install github.com/nats-io/natscli/nats")
	}
	b := setup(t, setupOpts{})
	b.start(t)
	// A store that is not fresh: another video job has succeeded already
	// and another was dead-lettered, so the walkthrough must pick its own
	// job's event and letter.
	b.publish(t, "video", "clip-0001", videoSpec("clip-0001", "an earlier boat"))
	if ev := b.await(t, "clip-0001", time.Minute); ev.Data.Status != "succeeded" {
		t.Fatalf("clip-0001 ended %s", ev.Data.Status)
	}
	b.publish(t, "video", "bad-0000", map[string]any{"id": "bad-0000", "kind": "video", "video": map[string]any{}})
	if ev := b.await(t, "bad-0000", time.Minute); ev.Data.Status != "failed" {
		t.Fatalf("bad-0000 ended %s", ev.Data.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var outs []string
	dir := t.TempDir()
	for _, block := range blocks {
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "NATS_URL="+b.nats.URL, "HOME="+dir, "XDG_CONFIG_HOME="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s\nfailed: %v\n%s", block, err, out)
		}
		outs = append(outs, string(out))
	}
	all := strings.Join(outs, "\n")
	t.Logf("walkthrough output:\n%s", all)

	ev := b.await(t, "clip-0002", time.Second)
	if ev.Data.Status != "succeeded" {
		t.Errorf("clip-0002 ended %s (%+v)", ev.Data.Status, ev.Data.Error)
	}
	prompt := "a paper boat with {{Count}} painted on its sail"
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("the prompt %q reached upstream %d times, want once, unrendered", prompt, n)
	}
	if strings.Contains(outs[1], "clip-0001") || !strings.Contains(outs[1], `"id":"clip-0002.succeeded"`) {
		t.Errorf("the event step printed another job's event, or not clip-0002's:\n%s", outs[1])
	}
	for _, want := range []string{
		`"id":"clip-0002.succeeded"`,    // the event, from the stream
		`"job_id":"clip-0002"`,          // the record, from the bucket
		`"status":"succeeded"`,          //
		"Sluice-Error", "Sluice-Job-Id", // the dead letter's headers
		"invalid_spec",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("the walkthrough's output lacks %s", want)
		}
	}
	if dl := b.deadLetters(t); len(dl) != 2 || dl[1].Header.Get("Sluice-Job-Id") != "bad-0001" {
		t.Errorf("dead letters: %d", len(dl))
	}
	if strings.Contains(outs[3], "bad-0000") {
		t.Errorf("the dead-letter step printed another job's letter:\n%s", outs[3])
	}
}
