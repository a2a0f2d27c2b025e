package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/buildinfo"
)

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		code       int
		done       bool
		stdout     []string
		stderr     string
		noStdout   bool
		unexpected string
	}{
		{args: nil, code: exitOK, done: false, noStdout: true},
		{args: []string{"--help"}, code: exitOK, done: true, stdout: []string{"Usage:", "SLUICE_DEV", "SLUICE_S3_BUCKET", "SLUICE_COMPUTE_POLL_INTERVAL", "30s (dev: 500ms)", "Exit codes:"}},
		{args: []string{"-h"}, code: exitOK, done: true, stdout: []string{"Usage:"}},
		{args: []string{"--version"}, code: exitOK, done: true, stdout: []string{"worker " + buildinfo.Read().Version, "commit " + buildinfo.Read().Commit}},
		{args: []string{"--verbose"}, code: exitInvalid, done: true, stderr: "flag provided but not defined: -verbose", noStdout: true},
		{args: []string{"run"}, code: exitInvalid, done: true, stderr: `unexpected argument "run"`, noStdout: true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code, done := flags(tc.args, &out, &errb)
			if code != tc.code || done != tc.done {
				t.Errorf("flags = %d, %v; want %d, %v", code, done, tc.code, tc.done)
			}
			for _, want := range tc.stdout {
				if !strings.Contains(out.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, out.String())
				}
			}
			if tc.noStdout && out.Len() > 0 {
				t.Errorf("stdout = %q", out.String())
			}
			if !strings.Contains(errb.String(), tc.stderr) || (tc.stderr == "" && errb.Len() > 0) {
				t.Errorf("stderr = %q, want %q", errb.String(), tc.stderr)
			}
			if strings.Contains(out.String()+errb.String(), "worker: invalid configuration") {
				t.Error("a flag was answered with a configuration error")
			}
		})
	}
}
