package chaos

import (
	"cmp"
	"fmt"
	"strings"
	"time"
)

// The resources a soak samples of every worker process, in the order of
// Resources' fields.
var resourceNames = [...]string{"rss_mib", "goroutines", "open_files", "nats_subs"}

// Resources is one sample of a worker process: its resident memory in
// MiB (/proc/<pid>/status), its goroutines (go_goroutines of its
// /metrics), its open files (/proc/<pid>/fd) and its NATS connection's
// subscriptions (the server's connection report, as /connz?subs=1 serves
// it). A value that could not be read is -1 (the process not serving
// /metrics yet, the NATS server down for a fault).
type Resources [len(resourceNames)]float64

// Sample is the resources of one process at At since the run's start.
type Sample struct {
	At time.Duration
	Resources
}

// Series is the samples of one worker process lifetime: a killed worker
// started again is another series, since a new process starts afresh.
type Series struct {
	// Process names the lifetime: the worker's SLUICE_WORKER_NAME.
	Process string
	// Started is when, since the run's start, the process was started.
	Started time.Duration
	Samples []Sample
}

// GrowthBound is how much a process may grow after its first Baseline of
// life: every later sample must stay within the baseline's highest value
// times Factor plus Slack, resource by resource.
type GrowthBound struct {
	// Baseline is the first stretch of each process's life, whose highest
	// values set the bound. Defaults to 10m.
	Baseline time.Duration
	// Factor multiplies the baseline's highest value. Defaults to 1.5.
	Factor float64
	// Slack is added to each resource's bound, so that a small process is
	// not failed for a few goroutines or file descriptors more. Defaults
	// to 16 MiB, 32 goroutines, 16 open files and 8 subscriptions.
	Slack Resources
}

func (b GrowthBound) withDefaults() GrowthBound {
	b.Baseline = cmp.Or(b.Baseline, 10*time.Minute)
	b.Factor = cmp.Or(b.Factor, 1.5)
	if b.Slack == (Resources{}) {
		b.Slack = Resources{16, 32, 16, 8}
	}
	return b
}

// Growth is one series' verdict on one resource.
type Growth struct {
	Process  string
	Resource string
	// BaselineMax is the highest value of the baseline, Bound the highest
	// allowed after it, LaterMax the highest value after it (-1: no
	// sample after the baseline, nothing to judge).
	BaselineMax, Bound, LaterMax float64
}

// Exceeded reports whether the series grew past its bound.
func (g Growth) Exceeded() bool { return g.LaterMax > g.Bound }

func (g Growth) String() string {
	return fmt.Sprintf("%s %s: baseline max %g, bound %g, later max %g", g.Process, g.Resource, g.BaselineMax, g.Bound, g.LaterMax)
}

// JudgeGrowth returns, for every series and resource with a known value in
// its baseline, the bound and the highest value after the baseline.
// Unknown values (-1) count nowhere; a series without a known baseline
// value of a resource is not judged on it.
func JudgeGrowth(series []Series, b GrowthBound) []Growth {
	b = b.withDefaults()
	var out []Growth
	for _, s := range series {
		for i, name := range resourceNames {
			base, later := -1.0, -1.0
			for _, sm := range s.Samples {
				v := sm.Resources[i]
				if v < 0 {
					continue
				}
				if sm.At-s.Started <= b.Baseline {
					base = max(base, v)
				} else {
					later = max(later, v)
				}
			}
			if base < 0 {
				continue
			}
			out = append(out, Growth{Process: s.Process, Resource: name, BaselineMax: base,
				Bound: base*b.Factor + b.Slack[i], LaterMax: later})
		}
	}
	return out
}

// SeriesTable is the series as text: a line per process lifetime and
// resource with every sample in order, then the bound and the highest
// value after the baseline ("-" for a value not read, and for a lifetime
// that ended within its baseline).
func SeriesTable(series []Series, growth []Growth) string {
	judged := map[[2]string]Growth{}
	for _, g := range growth {
		judged[[2]string{g.Process, g.Resource}] = g
	}
	var b strings.Builder
	for _, s := range series {
		fmt.Fprintf(&b, "%s (started at %s, %d samples)\n", s.Process, s.Started.Round(time.Second), len(s.Samples))
		for i, name := range resourceNames {
			vals := make([]string, len(s.Samples))
			for k, sm := range s.Samples {
				vals[k] = "-"
				if v := sm.Resources[i]; v >= 0 {
					vals[k] = fmt.Sprintf("%.0f", v)
				}
			}
			verdict := ""
			if g, ok := judged[[2]string{s.Process, name}]; ok && g.LaterMax >= 0 {
				verdict = fmt.Sprintf("  | bound %.0f, later max %.0f", g.Bound, g.LaterMax)
				if g.Exceeded() {
					verdict += " EXCEEDED"
				}
			}
			fmt.Fprintf(&b, "  %-10s %s%s\n", name, strings.Join(vals, " "), verdict)
		}
	}
	return b.String()
}
