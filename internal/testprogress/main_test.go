package main

import (
	"bytes"
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRunPrintsGoTestsLines runs the command on go test -json of a passing
// and a failing package: go test's own lines are there (the failure's
// output, FAIL and ok closing lines), each package's progress lines too,
// and the exit status is go test's.
func TestRunPrintsGoTestsLines(t *testing.T) {
	cmd := exec.Command("go", "run", ".", "-total", "2", "--", "go", "test", "-json", "-count=1", "./testdata/pass", "./testdata/fail")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit: %v, want go test's status 1", err)
	}
	text := out.String()
	for _, re := range []string{
		`(?m)^--- FAIL: TestFails .*\n\s+fail_test.go:\d+: this one fails$`,
		`(?m)^FAIL\s+\S+/testdata/fail\s+\d+\.\d+s$`,
		`(?m)^ok\s+\S+/testdata/pass\s+\d+\.\d+s$`,
		`(?m)^\[progress\] \S+/testdata/pass started`,
		`(?m)^\[progress\] \S+/testdata/fail fail; \d of 2 done after `,
		`(?m)^FAIL\n\[progress\] 2 of 2 packages done in `,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("the output lacks %s:\n%s", re, text)
		}
	}
}

// TestRunWithoutTestsIsNoFailure: a package without tests ("?", a skip)
// beside a passing one ends the run as go test ends it: exit status 0 and
// no closing FAIL line.
func TestRunWithoutTestsIsNoFailure(t *testing.T) {
	cmd := exec.Command("go", "run", ".", "-total", "2", "--", "go", "test", "-json", "-count=1", "./testdata/pass", "./testdata/notests")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("exit: %v, want 0", err)
	}
	text := out.String()
	if regexp.MustCompile(`(?m)^FAIL$`).MatchString(text) {
		t.Errorf("a run without failures closes with FAIL:\n%s", text)
	}
	if !regexp.MustCompile(`(?m)^\?\s+\S+/testdata/notests\s+\[no test files\]$`).MatchString(text) {
		t.Errorf("the output lacks go test's line for a package without tests:\n%s", text)
	}
}

// TestHandleHoldsOutputPerPackage: two packages running at once print
// their output whole when each ends, never interleaved, as plain go test
// prints it: a passed test's output and the === lines are dropped.
func TestHandleHoldsOutputPerPackage(t *testing.T) {
	var out bytes.Buffer
	now := time.Unix(0, 0)
	p := newProgress(&out, 0, func() time.Time { return now })
	for _, ev := range []event{
		{Action: "start", Package: "a"},
		{Action: "start", Package: "b"},
		{Action: "output", Package: "a", Test: "TestA", Output: "=== RUN   TestA\n"},
		{Action: "output", Package: "a", Test: "TestA", Output: "a1\n"},
		{Action: "output", Package: "b", Test: "TestB", Output: "b1\n"},
		{Action: "output", Package: "a", Test: "TestA", Output: "--- FAIL: TestA (0.00s)\n"},
		{Action: "fail", Package: "a", Test: "TestA"},
		{Action: "build-output", ImportPath: "c", Output: "# c\n"},
		{Action: "output", Package: "b", Test: "TestB", Output: "--- PASS: TestB (0.00s)\n"},
		{Action: "pass", Package: "b", Test: "TestB"},
		{Action: "output", Package: "b", Output: "PASS\n"},
		{Action: "output", Package: "b", Output: "ok  \tb\t0.1s\n"},
		{Action: "pass", Package: "b"},
		{Action: "output", Package: "a", Output: "FAIL\n"},
		{Action: "output", Package: "a", Output: "FAIL\ta\t0.2s\n"},
		{Action: "fail", Package: "a"},
	} {
		p.handle(ev)
	}
	var plain []string
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.HasPrefix(l, "[progress] ") {
			plain = append(plain, l)
		}
	}
	want := []string{"# c", "ok  \tb\t0.1s", "--- FAIL: TestA (0.00s)", "a1", "FAIL", "FAIL\ta\t0.2s"}
	if strings.Join(plain, "|") != strings.Join(want, "|") {
		t.Errorf("plain lines %q, want %q\n%s", plain, want, out.String())
	}
}
