// Command testprogress runs `go test -json` and prints what plain
// `go test` prints (each package's output, its closing ok / FAIL / ?
// line), plus a line as each package starts and ends, one every minute
// naming the packages still running, and the total time. It exits with
// go test's status. make test runs it:
//
//	go run ./internal/testprogress -total N -- go test -json -race ./...
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	total := flag.Int("total", 0, "how many packages the run has (0: not known)")
	every := flag.Duration("every", time.Minute, "how often to name the packages still running")
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: testprogress [-total N] [-every D] -- go test -json [flags] [packages]")
		os.Exit(2)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
	p := newProgress(os.Stdout, *total, time.Now)
	stop := make(chan struct{})
	go p.tick(*every, stop)
	p.copy(out)
	close(stop)
	err = cmd.Wait()
	p.finish()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(2)
	}
}

// event is the part of a test2json event the output needs.
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output and build-fail events
	Test       string
	Output     string
}

// progress turns go test -json's events back into plain go test's text
// (the output of failed tests, each package's closing line; -json runs
// the tests verbosely, so the output of passed tests is dropped as plain
// go test drops it), and adds the progress lines, each starting with
// "[progress] " so that nothing reading the standard lines mistakes one
// for them.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	total   int
	now     func() time.Time
	start   time.Time
	running map[string]time.Time // package -> when it started
	held    map[string]*pkgOutput
	done    int
	failed  bool
}

// pkgOutput is a package's output until it ends, by test ("" for the
// package's own lines), tests in the order their output began.
type pkgOutput struct {
	tests []string
	lines map[string][]string
}

func newProgress(w io.Writer, total int, now func() time.Time) *progress {
	return &progress{w: w, total: total, now: now, start: now(), running: map[string]time.Time{}, held: map[string]*pkgOutput{}}
}

// copy reads events from r until it ends. A line that is not an event
// (go test's own messages) is printed as it is.
func (p *progress) copy(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Action == "" {
			p.print(line + "\n")
			continue
		}
		p.handle(ev)
	}
}

// handle prints a package's output when it ends, as go test does, so the
// packages running at once do not interleave.
func (p *progress) handle(ev event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev.Package == "" {
		fmt.Fprint(p.w, ev.Output) // build output: printed as it comes
		return
	}
	pkg := ev.Package
	out := p.held[pkg]
	if out == nil {
		out = &pkgOutput{lines: map[string][]string{}}
		p.held[pkg] = out
	}
	switch {
	case ev.Action == "start":
		p.running[pkg] = p.now()
		fmt.Fprintf(p.w, "[progress] %s started%s\n", pkg, p.count())
	case ev.Action == "output":
		if _, seen := out.lines[ev.Test]; !seen {
			out.tests = append(out.tests, ev.Test)
		}
		out.lines[ev.Test] = append(out.lines[ev.Test], ev.Output)
	case ev.Test != "" && (ev.Action == "pass" || ev.Action == "skip"):
		delete(out.lines, ev.Test)
	case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
		p.flush(pkg, ev.Action != "fail")
		delete(p.running, pkg)
		p.done++
		fmt.Fprintf(p.w, "[progress] %s %s; %d%s done after %s\n", pkg, ev.Action, p.done, p.of(), p.elapsed())
	}
}

// flush prints what plain go test prints of pkg: the output of the tests
// that did not pass, without the verbose run's === lines, then the
// package's own lines (its closing line last), without a passing run's
// PASS line.
func (p *progress) flush(pkg string, passed bool) {
	out := p.held[pkg]
	delete(p.held, pkg)
	if out == nil {
		return
	}
	tests := slices.DeleteFunc(out.tests, func(t string) bool { return t == "" })
	for _, test := range append(tests, "") {
		lines := out.lines[test]
		// The verbose run reports "--- FAIL: T" after T's output; plain
		// go test heads the output with it.
		if i := slices.IndexFunc(lines, func(s string) bool { return strings.HasPrefix(s, "--- FAIL: "+test+" ") }); test != "" && i > 0 {
			lines = slices.Concat(lines[i:i+1], lines[:i], lines[i+1:])
		}
		for _, s := range lines {
			if strings.HasPrefix(s, "=== ") || (test == "" && passed && s == "PASS\n") {
				continue
			}
			fmt.Fprint(p.w, s)
		}
	}
	if !passed {
		p.failed = true
	}
}

// print writes s as it is.
func (p *progress) print(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprint(p.w, s)
}

// tick names the packages still running every d until stop.
func (p *progress) tick(d time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			p.report()
		}
	}
}

// report names the packages still running, the longest-running first.
func (p *progress) report() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.running) == 0 {
		return
	}
	now := p.now()
	pkgs := make([]string, 0, len(p.running))
	for pkg := range p.running {
		pkgs = append(pkgs, pkg)
	}
	slices.SortFunc(pkgs, func(a, b string) int { return p.running[a].Compare(p.running[b]) })
	parts := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		parts[i] = fmt.Sprintf("%s (%s)", pkg, now.Sub(p.running[pkg]).Round(time.Second))
	}
	fmt.Fprintf(p.w, "[progress] %d%s done after %s; running: %s\n", p.done, p.of(), p.elapsed(), strings.Join(parts, ", "))
}

// finish prints what the packages that never ended left (the run was
// killed), then the total.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pkg := range slices.Sorted(maps.Keys(p.held)) {
		p.flush(pkg, false)
	}
	if p.failed {
		fmt.Fprintln(p.w, "FAIL") // go test's last line when a package failed
	}
	fmt.Fprintf(p.w, "[progress] %d%s packages done in %s\n", p.done, p.of(), p.elapsed())
}

func (p *progress) of() string {
	if p.total <= 0 {
		return ""
	}
	return fmt.Sprintf(" of %d", p.total)
}

func (p *progress) count() string {
	if p.total <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of %d done)", p.done, p.total)
}

func (p *progress) elapsed() time.Duration { return p.now().Sub(p.start).Round(time.Second) }
