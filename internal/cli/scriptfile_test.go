package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/jobspec"
)

// computeArgs are enqueue compute's required flags but the script's.
var computeArgs = []string{"compute", "--template", "BASIC/BASE", "--queue", "normal", "--nodes", "1", "--ppn", "1", "--wall-time", "00:10:00"}

// TestComputeScriptFile: --script-file uploads the local script by content,
// puts it first in the inputs with the work dir as its directory and runs
// it from there; --dry-run shows it without uploading; the same bytes again
// upload nothing.
func TestComputeScriptFile(t *testing.T) {
	t.Parallel()
	b := setupLocal(t)
	body := []byte("#!/bin/sh\necho hello\n")
	script := filepath.Join(b.dir, "hello.sh")
	if err := os.WriteFile(script, body, 0o644); err != nil {
		t.Fatal(err)
	}
	key := "sluice/inputs/sha256/" + sum(body) + ".sh"
	url := "s3://" + b.s3.Bucket + "/" + key
	dir := "/public/home/dev/hello"
	args := append(computeArgs, "--script-file", script, "--work-dir", dir, "--input", "s3://data/params.nml="+dir)

	code, stdout, stderr := b.enqueue(t, false, append(args, "--id", "script-0", "--dry-run")...)
	if code != ExitOK || !strings.Contains(stdout, url) {
		t.Errorf("dry run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if objs := b.objects(t); len(objs) != 0 {
		t.Errorf("dry run uploaded %v", objs)
	}

	code, stdout, stderr = b.enqueue(t, false, append(args, "--id", "script-1")...)
	if code != ExitOK || !strings.Contains(stderr, fmt.Sprintf("--script-file %s (%d bytes) uploaded %s", script, len(body), url)) {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if objs := b.objects(t); len(objs) != 1 || objs[key] != sum(body) {
		t.Errorf("objects = %v, want %s with its sha256", objs, key)
	}
	specs := b.published(t)
	if len(specs) != 1 {
		t.Fatalf("published %d specs", len(specs))
	}
	c := specs[0].Compute
	want := []jobspec.ComputeInput{{From: url, To: dir, Cover: true}, {From: "s3://data/params.nml", To: dir}}
	if c.Job.Script != dir+"/"+sum(body)+".sh" || c.Job.WorkDir != dir || len(c.Inputs) != 2 || c.Inputs[0] != want[0] || c.Inputs[1] != want[1] {
		t.Errorf("published script %q work dir %q inputs %+v; want %s/<sha256>.sh, %s, %+v", c.Job.Script, c.Job.WorkDir, c.Inputs, dir, dir, want)
	}

	code, stdout, stderr = b.enqueue(t, false, append(args, "--id", "script-2")...)
	if code != ExitOK || !strings.Contains(stderr, "already in S3, not uploaded again") {
		t.Errorf("second run: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// TestComputeScriptFileRefused: a script flag that cannot work is an
// immediate error naming it; nothing is uploaded or published.
func TestComputeScriptFileRefused(t *testing.T) {
	t.Parallel()
	b := setupLocal(t)
	script := filepath.Join(b.dir, "run.sh")
	if err := os.WriteFile(script, []byte("echo hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(b.dir, "empty.sh")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"no script", nil, "--script/--script-file (compute.job.script): required"},
		{"both", []string{"--script-file", script, "--work-dir", "/w", "--script", "/w/run.sh"}, "give --script (a path on the cluster) or --script-file (a local file), not both"},
		{"no work dir", []string{"--script-file", script}, "--script-file needs --work-dir"},
		{"relative work dir", []string{"--script-file", script, "--work-dir", "w"}, "--script-file needs --work-dir, the absolute directory"},
		{"missing", []string{"--script-file", filepath.Join(b.dir, "none.sh"), "--work-dir", "/w"}, "none.sh: no such file or directory"},
		{"empty", []string{"--script-file", empty, "--work-dir", "/w"}, "empty.sh: the file is empty"},
		{"a directory", []string{"--script-file", b.dir, "--work-dir", "/w"}, "not a regular file"},
		{"invalid spec", []string{"--script-file", script, "--work-dir", "/w", "--wall-time", "10 minutes"}, "--wall-time (compute.job.wall_time)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := b.enqueue(t, false, append(computeArgs, tt.args...)...)
			if code != ExitUsage || !strings.Contains(stderr, tt.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tt.msg)
			}
		})
	}
	if objs := b.objects(t); len(objs) != 0 {
		t.Errorf("refused runs uploaded %v", objs)
	}
	if specs := b.published(t); len(specs) != 0 {
		t.Errorf("refused runs published %d specs", len(specs))
	}
}
