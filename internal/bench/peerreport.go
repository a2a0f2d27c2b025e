package bench

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// peerMedians are one side's medians over the pairs.
type peerMedians struct {
	rate                                   float64
	headline, all, worker, store, s3, rest time.Duration
	latency                                time.Duration
	writes                                 float64
}

func mediansOf(passes []peerPass) peerMedians {
	var m peerMedians
	var rates, writes []float64
	var hl, all, wk, st, s3, rest, lat []time.Duration
	for _, p := range passes {
		rates, writes = append(rates, p.rate()), append(writes, p.writes)
		hl, all = append(hl, p.headline()), append(all, p.all())
		wk, st, s3, rest = append(wk, p.per(p.worker)), append(st, p.per(p.store)), append(s3, p.per(p.s3)), append(rest, p.per(p.rest))
		lat = append(lat, quantile(p.latencies, 0.5))
	}
	m.rate, m.writes = median(rates), median(writes)
	m.headline, m.all, m.worker, m.store, m.s3, m.rest = median(hl), median(all), median(wk), median(st), median(s3), median(rest)
	m.latency = median(lat)
	return m
}

// sides returns the sluice and the River passes of the pairs.
func (rep *PeerReport) sides() (sl, rv []peerPass) {
	for _, p := range rep.Pairs {
		sl, rv = append(sl, p.Sluice), append(rv, p.River)
	}
	return sl, rv
}

// pairRatios returns each pair's sluice/River ratio of f, sorted.
func (rep *PeerReport) pairRatios(f func(peerPass) float64) []float64 {
	var rs []float64
	for _, p := range rep.Pairs {
		rs = append(rs, f(p.Sluice)/f(p.River))
	}
	slices.Sort(rs)
	return rs
}

// WriteMarkdown renders the comparison in BENCHMARKS.md's form: one table
// of medians with sluice / River ratios, then every pass.
func (rep *PeerReport) WriteMarkdown(w io.Writer) {
	sl, rv := rep.sides()
	s, r := mediansOf(sl), mediansOf(rv)
	n := len(rep.Pairs)
	rates := rep.pairRatios(peerPass.rate)
	cpu := rep.pairRatios(func(p peerPass) float64 { return p.headline().Seconds() })
	label := ""
	if rep.Label != "" {
		label = ", " + rep.Label
	}
	fmt.Fprintf(w, "Run %s%s: %d pairs of passes, %s quick jobs each, then %d one at a time; took %s.\n\n",
		rep.Started.UTC().Format("2006-01-02 15:04 UTC"), label, n, thousands(rep.Jobs), rep.Latency, rep.Took)
	fmt.Fprintf(w, "Machine: %s, %d CPUs, %d MiB memory, %s, %s; %s. Load average (1, 5, 15 min) %s at the start, %s at the end.\n\n",
		rep.Machine.CPU, rep.Machine.CPUs, rep.Machine.MemoryMiB, rep.Machine.Go, rep.Machine.OS, rep.Postgres, rep.LoadBefore, rep.LoadAfter)
	fmt.Fprintf(w, "| figure (median of %d pairs) | sluice | River + Postgres | sluice / River |\n", n)
	fmt.Fprintln(w, "|---|---|---|---|")
	fmt.Fprintf(w, "| %s quick jobs, jobs/s (pairs ranged %.2f–%.2f×) | %.0f | %.0f | **%.2f×** (median of the pairs' ratios) |\n",
		thousands(rep.Jobs), rates[0], rates[len(rates)-1], s.rate, r.rate, median(rates))
	row := func(label string, a, b time.Duration, bold bool) {
		f := "%.2f×"
		if bold {
			f = "**%.2f×**"
		}
		fmt.Fprintf(w, "| %s | %s | %s | "+f+" |\n", label, ms2(a), ms2(b), a.Seconds()/b.Seconds())
	}
	row(fmt.Sprintf("CPU per job, worker + store (headline; pairs ranged %.2f–%.2f×)", cpu[0], cpu[len(cpu)-1]), s.headline, r.headline, true)
	row("CPU per job, all processes", s.all, r.all, true)
	row("CPU per job, the store (nats-server vs Postgres)", s.store, r.store, true)
	row("CPU per job, the worker process", s.worker, r.worker, false)
	row("CPU per job, the S3 store (versitygw)", s.s3, r.s3, false)
	row("CPU per job, the rest (harness: simulator and job source; River's driver process)", s.rest, r.rest, false)
	row(fmt.Sprintf("enqueue → completion, median of %d one at a time", rep.Latency), s.latency, r.latency, false)
	fmt.Fprintf(w, "| store writes per job: `SLUICE_STATE` writes / River snoozes | %.2f | %.2f | |\n", s.writes, r.writes)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| pair | first | sluice jobs/s | River jobs/s | ratio | sluice CPU/job, worker + store | River CPU/job, worker + store | ratio | latency median, sluice / River | others' CPU, sluice / River pass |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for i, p := range rep.Pairs {
		first := "sluice"
		if p.RiverFirst {
			first = "River"
		}
		fmt.Fprintf(w, "| %d | %s | %.0f | %.0f | %.2f× | %s | %s | %.2f× | %s / %s | %.2f / %.2f cores |\n", i+1, first,
			p.Sluice.rate(), p.River.rate(), p.Sluice.rate()/p.River.rate(),
			ms2(p.Sluice.headline()), ms2(p.River.headline()), p.Sluice.headline().Seconds()/p.River.headline().Seconds(),
			ms(quantile(p.Sluice.latencies, 0.5)), ms(quantile(p.River.latencies, 0.5)), p.Sluice.otherCores(), p.River.otherCores())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Others' CPU is what the rest of the machine (other programs, the host's steal) kept busy during a pass's batch, "+
		"in CPUs out of %d: all busy time in /proc/stat less the measured parts'.\n\n", rep.Machine.CPUs)
}

// thousands formats n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// ms2 formats a duration in milliseconds with two decimals.
func ms2(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
