package chaos

import (
	"strings"
	"testing"
	"time"
)

// series builds one lifetime started at start with a sample a minute of
// the given resident memory (MiB), the other resources flat.
func series(name string, start time.Duration, rss ...float64) Series {
	s := Series{Process: name, Started: start}
	for i, v := range rss {
		s.Samples = append(s.Samples, Sample{At: start + time.Duration(i)*time.Minute, Resources: Resources{v, 40, 20, 12}})
	}
	return s
}

// The verdict: each lifetime against its own first Baseline, resource by
// resource, unknown values ignored.
func TestJudgeGrowth(t *testing.T) {
	t.Parallel()
	bound := GrowthBound{Baseline: 90 * time.Second, Factor: 1.5, Slack: Resources{4, 10, 5, 2}}
	unknownLater := series("w", 0, 20, 22, 21)
	unknownLater.Samples = append(unknownLater.Samples, Sample{At: 3 * time.Minute, Resources: Resources{-1, -1, -1, -1}})
	subsLeak := series("w", 0, 20, 20, 20, 20)
	subsLeak.Samples[3].Resources[3] = 12*1.5 + 2 + 1
	lateStart := series("w", 0, 30, 30, 30)
	lateStart.Samples[0].Resources[1] = -1 // /metrics not served yet at the first sample
	lateStart.Samples[2].Resources[1] = 70 // 40*1.5+10: on the bound
	tests := []struct {
		name     string
		series   []Series
		exceeded []string // "process resource" past the bound
		judged   int      // verdicts with a sample after the baseline
	}{
		{"flat", []Series{series("w", 0, 20, 22, 21, 22, 21)}, nil, 4},
		{"growth within factor and slack", []Series{series("w", 0, 20, 22, 30, 36, 37)}, nil, 4},
		{"rss leak", []Series{series("w", 0, 20, 22, 30, 36, 37.1)}, []string{"w rss_mib"}, 4},
		{"subscription leak", []Series{subsLeak}, []string{"w nats_subs"}, 4},
		{"ended within its baseline: nothing to judge", []Series{series("w", 0, 20, 200)}, nil, 0},
		{"unknown values count nowhere", []Series{unknownLater}, nil, 4},
		{"the bound itself passes", []Series{lateStart}, nil, 4},
		{
			// A restarted process starts afresh: its baseline is its own
			// first minutes, not the run's.
			"lifetimes judged apart",
			[]Series{series("a-0", 0, 60, 60, 60, 60), series("a-1", 10*time.Minute, 20, 20, 20, 40)},
			[]string{"a-1 rss_mib"}, 8,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var exceeded []string
			judged := 0
			for _, g := range JudgeGrowth(tc.series, bound) {
				if g.LaterMax >= 0 {
					judged++
				}
				if g.Exceeded() {
					exceeded = append(exceeded, g.Process+" "+g.Resource)
				}
			}
			if strings.Join(exceeded, ",") != strings.Join(tc.exceeded, ",") || judged != tc.judged {
				t.Errorf("exceeded %q (judged %d), want %q (judged %d)", exceeded, judged, tc.exceeded, tc.judged)
			}
		})
	}
}

// The defaults: 10 minutes, 1.5 and a slack on each resource.
func TestGrowthBoundDefaults(t *testing.T) {
	t.Parallel()
	b := GrowthBound{}.withDefaults()
	if b.Baseline != 10*time.Minute || b.Factor != 1.5 || b.Slack != (Resources{16, 32, 16, 8}) {
		t.Errorf("defaults %+v", b)
	}
	g := JudgeGrowth([]Series{series("w", 0, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 31.1)}, GrowthBound{})
	if len(g) != len(resourceNames) || !g[0].Exceeded() || g[1].Exceeded() {
		t.Errorf("verdicts %v", g)
	}
}

// The table names each lifetime and marks a series past its bound.
func TestSeriesTable(t *testing.T) {
	t.Parallel()
	s := []Series{series("chaos-w0-0", 0, 20, 20, 40)}
	s[0].Samples[0].Resources[1] = -1
	out := SeriesTable(s, JudgeGrowth(s, GrowthBound{Baseline: time.Minute, Factor: 1.5, Slack: Resources{1, 1, 1, 1}}))
	for _, want := range []string{"chaos-w0-0 (started at 0s, 3 samples)", "rss_mib    20 20 40  | bound 31, later max 40 EXCEEDED", "goroutines - 40 40  | bound 61, later max 40\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
