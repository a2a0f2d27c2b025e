package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
)

// Backlog defaults: B1 publishes this many jobs (-backlog), and measures
// the drain over windows of this length.
const (
	DefaultBacklog = 1_000_000
	backlogShallow = 10_000
)

// backlog measures B1: a large account's backlog of instant video jobs,
// in plain FIFO order and with fair scheduling. The drain rate with the
// whole backlog waiting is compared with the drain rate with about 10,000
// waiting, over windows of the same length in the same run.
func (r *run) backlog(ctx context.Context) (*Figure, error) {
	n := r.o.Backlog
	if n <= 0 {
		n = pick(r, DefaultBacklog, 20_000)
	}
	fig := &Figure{ID: "B1", Title: fmt.Sprintf("backlog: %d instant video jobs waiting, one worker", n),
		Target: "jobs/s drained with the whole backlog waiting ≥ 0.9× jobs/s with about 10,000 waiting (same window, same run); with fair scheduling another tenant's and an urgent job start within 2 turnovers once admitted; the worker's RSS does not grow with the backlog"}
	fig.Settings = append(slices.Clone(throughputSettings[:1]),
		"NATS in a process of its own (bench natsserve), its store under the run's directory: its RSS and store size are its own",
		"an ack probe acknowledges one job message a 100 ms on sluice.jobs.speech (a kind the worker does not serve, from its consumer sluice-speech) in SLUICE_JOBS and times the acknowledgement's round trip (AckSync)")
	modes := r.o.BacklogModes
	if len(modes) == 0 {
		modes = pick(r, []string{"fifo", "fair"}, []string{"fair"})
	}
	met := true
	var measured []string
	for _, mode := range modes {
		m, ok, err := r.backlogMode(ctx, fig, mode, n)
		if err != nil {
			return fig, fmt.Errorf("%s: %w", mode, err)
		}
		met = met && ok
		measured = append(measured, m)
	}
	fig.Measured, fig.Met = strings.Join(measured, "; "), met
	return fig, nil
}

// backlogMode runs one mode ("fifo" or "fair") of B1 on a stack of its own.
func (r *run) backlogMode(ctx context.Context, fig *Figure, mode string, n int) (string, bool, error) {
	if mode != "fifo" && mode != "fair" {
		return "", false, fmt.Errorf("unknown backlog mode %q (want fifo or fair)", mode)
	}
	b, err := r.startBacklog(ctx, "b1"+mode, mode == "fair")
	if err != nil {
		return "", false, err
	}
	defer b.close()
	window := pick(r, 30*time.Second, 5*time.Second)
	shallow, err := b.shallowWindow(ctx, pick(r, backlogShallow, 2_000), window)
	if err != nil {
		return "", false, err
	}
	deep, err := b.deepWindow(ctx, fig, mode, n, window)
	if err != nil {
		return "", false, err
	}
	ratio := deep.rate / shallow.rate
	fig.row(mode+": jobs/s drained, ~"+fmt.Sprint(shallow.waiting)+" waiting → "+fmt.Sprint(deep.waiting)+" waiting",
		"%.0f → %.0f (%.2f×) over %s each; slowest second %d → %d jobs", shallow.rate, deep.rate, ratio, window, shallow.minSecond, deep.minSecond)
	fig.row(mode+": ack round trip p50 / p99 / max, shallow → deep", "%s / %s / %s → %s / %s / %s",
		ms(shallow.ack.p50), ms(shallow.ack.p99), ms(shallow.ack.max), ms(deep.ack.p50), ms(deep.ack.p99), ms(deep.ack.max))
	fig.row(mode+": nats-server CPU per job drained, shallow → deep", "%s → %s", ms(shallow.natsCPUPerJob), ms(deep.natsCPUPerJob))
	fig.row(mode+": worker RSS, shallow → deep", "%s → %s", mib(shallow.workerRSS), mib(deep.workerRSS))
	ok := ratio >= 0.9 && float64(deep.workerRSS) <= 1.25*float64(shallow.workerRSS)
	m := fmt.Sprintf("%s %.2f× (%.0f → %.0f jobs/s)", mode, ratio, shallow.rate, deep.rate)
	if mode == "fair" {
		fair, fairOK, err := b.fairStarts(ctx, fig, deep.rate)
		if err != nil {
			return "", false, err
		}
		ok, m = ok && fairOK, m+", "+fair
	}
	return m, ok, nil
}

// backlogRun is one mode's stack: NATS in its own process, the worker,
// the event counter and the ack probe.
type backlogRun struct {
	r      *run
	name   string
	fair   bool
	nats   *process
	st     *stack
	w      *worker
	ev     *drainEvents
	probe  *ackProbe
	serial int
}

func (r *run) startBacklog(ctx context.Context, name string, fair bool) (_ *backlogRun, err error) {
	b := &backlogRun{r: r, name: name, fair: fair}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	dir := r.scenarioDir(name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if b.nats, err = startProcess(name+"-nats", r.o.Self, []string{"natsserve", "-dir", filepath.Join(dir, "nats")}, nil, dir); err != nil {
		return nil, err
	}
	natsURL, err := b.nats.line(ctx, "READY", 30*time.Second)
	if err != nil {
		return nil, err
	}
	if b.st, err = newStack(ctx, dir, stackOptions{NATSURL: natsURL, Media: apisim.MediaConfig{ResultSize: 1 << 10}}); err != nil {
		return nil, err
	}
	if fair {
		// Any tenant's settings turn fair scheduling on before the first job.
		if _, err := b.st.enqueue(ctx, "tenants", "set", "team-a", "--weight", "1"); err != nil {
			return nil, err
		}
	}
	if b.ev, err = countDrain(b.st.nc); err != nil {
		return nil, err
	}
	if b.probe, err = startAckProbe(ctx, b.st.js); err != nil {
		return nil, err
	}
	if b.w, err = r.startWorker(ctx, b.st, name+"-worker", throughputEnv); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *backlogRun) close() {
	if b.probe != nil {
		b.probe.stop()
	}
	if b.w != nil {
		b.w.stop(30 * time.Second)
	}
	if b.ev != nil {
		b.ev.close()
	}
	if b.st != nil {
		b.st.close()
	}
	if b.nats != nil {
		b.nats.stop(30 * time.Second)
	}
}
