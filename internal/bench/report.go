package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Report is the outcome of a run.
type Report struct {
	Machine Machine
	Quick   bool
	Started time.Time
	Took    time.Duration
	Figures []*Figure
}

// Machine describes where the run happened.
type Machine struct {
	CPU       string
	CPUs      int
	MemoryMiB uint64
	Go        string
	OS        string
}

// Figure is one figure of BENCHMARKS.md: the headline against its target,
// and the absolute numbers behind it.
type Figure struct {
	ID    string
	Title string
	// Target is the goal, e.g. "≥ 0.8× the floor".
	Target string
	// Measured is the headline figure, e.g. "0.91×".
	Measured string
	// Met reports whether Measured meets Target.
	Met bool
	// Rows are the absolute numbers: label and value.
	Rows [][2]string
	// Settings lists the worker settings that differ from the defaults,
	// each with why.
	Settings []string
	// Notes explain the method.
	Notes []string
	Err   string
	Took  time.Duration
}

func (f *Figure) row(label, format string, args ...any) {
	f.Rows = append(f.Rows, [2]string{label, fmt.Sprintf(format, args...)})
}

// readMachine reads /proc/cpuinfo and /proc/meminfo.
func readMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				var kb uint64
				_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
				m.MemoryMiB = kb >> 10
			}
		}
	}
	return m
}

// WriteMarkdown renders the report as Markdown.
func (rep *Report) WriteMarkdown(w io.Writer) {
	variant := "full (`make bench`)"
	if rep.Quick {
		variant = "quick (`make bench-quick`, smoke check: smaller counts, not the published figures)"
	}
	fmt.Fprintf(w, "Run %s, %s variant, took %s.\n\n", rep.Started.UTC().Format("2006-01-02 15:04 UTC"), variant, rep.Took)
	fmt.Fprintf(w, "Machine: %s, %d CPUs, %d MiB memory, %s, %s.\n\n", rep.Machine.CPU, rep.Machine.CPUs, rep.Machine.MemoryMiB, rep.Machine.Go, rep.Machine.OS)
	fmt.Fprintln(w, "| figure | target | measured | met |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, f := range rep.Figures {
		met := "yes"
		switch {
		case f.Err != "":
			met = "error"
		case !f.Met:
			met = "**no**"
		}
		fmt.Fprintf(w, "| %s %s | %s | %s | %s |\n", f.ID, f.Title, f.Target, f.Measured, met)
	}
	for _, f := range rep.Figures {
		fmt.Fprintf(w, "\n### %s %s\n\n", f.ID, f.Title)
		if f.Err != "" {
			fmt.Fprintf(w, "Error: %s\n\n", f.Err)
		}
		fmt.Fprintf(w, "Target %s; measured **%s** (took %s).\n\n", f.Target, f.Measured, f.Took)
		if len(f.Rows) > 0 {
			fmt.Fprintln(w, "| measure | value |")
			fmt.Fprintln(w, "|---|---|")
			for _, r := range f.Rows {
				fmt.Fprintf(w, "| %s | %s |\n", r[0], r[1])
			}
			fmt.Fprintln(w)
		}
		if len(f.Settings) > 0 {
			fmt.Fprintln(w, "Worker settings that differ from the defaults:")
			fmt.Fprintln(w)
			for _, s := range f.Settings {
				fmt.Fprintf(w, "- %s\n", s)
			}
			fmt.Fprintln(w)
		}
		for _, n := range f.Notes {
			fmt.Fprintf(w, "%s\n\n", n)
		}
	}
}

// mib formats bytes as MiB.
func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// ms formats a duration in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
