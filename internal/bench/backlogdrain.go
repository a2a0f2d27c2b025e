package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobqueue"
)

// drainWindow is what one measuring window saw.
type drainWindow struct {
	waiting       int // jobs waiting when the window began
	rate          float64
	minSecond     int // fewest jobs ended in one whole second of the window
	ack           percentiles
	natsCPUPerJob time.Duration
	workerRSS     uint64
}

// backlogSpec is an instant video job's spec; with fair scheduling, of
// tenant at priority.
func backlogSpec(id, tenant string, priority int) []byte {
	body := videoSpec(id, instant)
	if tenant == "" {
		return body
	}
	var spec map[string]any
	_ = json.Unmarshal(body, &spec)
	spec["tenant"], spec["priority"] = tenant, priority
	body, _ = json.Marshal(spec)
	return body
}

// publish publishes n jobs prefix-0000000... (of team-a at priority 5 with
// fair scheduling) asynchronously, at most 4096 unacknowledged, and
// returns how long it took.
func (b *backlogRun) publish(ctx context.Context, prefix string, n int) (time.Duration, error) {
	tenant := ""
	if b.fair {
		tenant = "team-a"
	}
	start := time.Now()
	for from := 0; from < n; from += 4096 {
		for i := from; i < min(from+4096, n); i++ {
			id := fmt.Sprintf("%s-%07d", prefix, i)
			m := nats.NewMsg(contract.JobSubject("video"))
			m.Data = backlogSpec(id, tenant, 5)
			m.Header.Set(contract.HeaderMsgID, id)
			if _, err := b.st.js.PublishMsgAsync(m); err != nil {
				return 0, fmt.Errorf("publish %s: %w", id, err)
			}
		}
		select {
		case <-b.st.js.PublishAsyncComplete():
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return time.Since(start), nil
}

// waiting counts the video jobs in SLUICE_JOBS: on the intake subjects
// and in class queues.
func (b *backlogRun) waiting(ctx context.Context) (intake, classes int, err error) {
	stream, err := b.st.js.Stream(ctx, contract.JobsStream)
	if err != nil {
		return 0, 0, err
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(contract.JobSubject("video")+".>"))
	if err != nil {
		return 0, 0, err
	}
	for subject, n := range info.State.Subjects {
		if _, ok := contract.ParseClassSubject(subject); ok {
			classes += int(n)
		} else {
			intake += int(n)
		}
	}
	// The filter leaves out sluice.jobs.video itself.
	info, err = stream.Info(ctx, jetstream.WithSubjectFilter(contract.JobSubject("video")))
	if err != nil {
		return 0, 0, err
	}
	return intake + int(info.State.Subjects[contract.JobSubject("video")]), classes, nil
}

// shallowWindow measures the drain with about `about` jobs waiting: a
// warm-up batch estimates the rate, then about + one window's worth are
// published and the window measured right after.
func (b *backlogRun) shallowWindow(ctx context.Context, about int, window time.Duration) (drainWindow, error) {
	warm := about / 5
	start := time.Now()
	if _, err := b.publish(ctx, "warm", warm); err != nil {
		return drainWindow{}, err
	}
	if err := b.ev.waitEnded(ctx, warm, 10*time.Minute); err != nil {
		return drainWindow{}, err
	}
	rate := float64(warm) / time.Since(start).Seconds()
	if _, err := b.publish(ctx, "shallow", about+int(rate*window.Seconds())); err != nil {
		return drainWindow{}, err
	}
	return b.measure(ctx, window)
}

// deepWindow publishes the backlog, reports its publish (and admission)
// rate, its store and the server's memory, then measures a window.
func (b *backlogRun) deepWindow(ctx context.Context, fig *Figure, mode string, n int, window time.Duration) (drainWindow, error) {
	before := b.ev.ended()
	took, err := b.publish(ctx, "deep", n)
	if err != nil {
		return drainWindow{}, err
	}
	fig.row(mode+": publish", "%d jobs in %s: %.0f jobs/s (async, 4096 unacknowledged at most, the worker draining meanwhile)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	if err := b.reportStore(fig, mode, "after the publish"); err != nil {
		return drainWindow{}, err
	}
	if b.fair {
		if err := b.admitted(ctx, fig, n, took); err != nil {
			return drainWindow{}, err
		}
	}
	if err := b.timeFind(ctx, fig, mode, before); err != nil {
		return drainWindow{}, err
	}
	return b.measure(ctx, window)
}

// reportStore reports nats-server's RSS and the size of its store.
func (b *backlogRun) reportStore(fig *Figure, mode, when string) error {
	st, err := b.nats.stats()
	if err != nil {
		return err
	}
	var size int64
	_ = filepath.WalkDir(filepath.Join(b.st.dir, "nats"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				size += info.Size()
			}
		}
		return nil
	})
	fig.row(mode+": nats-server RSS (peak) and store size, "+when, "%s (%s), %s", mib(st.RSS), mib(st.HWM), mib(uint64(size)))
	return nil
}

// admitted waits until the admission has moved every job out of the
// intake and reports its rate.
func (b *backlogRun) admitted(ctx context.Context, fig *Figure, n int, published time.Duration) error {
	start := time.Now().Add(-published)
	for {
		intake, classes, err := b.waiting(ctx)
		if err != nil {
			return err
		}
		if intake == 0 {
			took := time.Since(start)
			fig.row("fair: admission", "%d jobs moved to class queues %s after the publish began: %.0f jobs/s; %d in class queues then",
				n, took.Round(time.Second), float64(n)/took.Seconds(), classes)
			return b.reportStore(fig, "fair", "after the admission")
		}
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
	}
}

// timeFind times enqueue's look-up of a job with no record 1,000 deep in
// the backlog (jobqueue.Find, what enqueue status and cancel do); before
// is how many jobs had ended when the backlog's publish began.
func (b *backlogRun) timeFind(ctx context.Context, fig *Figure, mode string, before int) error {
	depth := pick(b.r, 1_000, 500)
	id := fmt.Sprintf("deep-%07d", b.ev.ended()-before+depth)
	start := time.Now()
	_, err := jobqueue.Find(ctx, b.st.js, id)
	if err != nil {
		return fmt.Errorf("find %s: %w", id, err)
	}
	took := time.Since(start)
	fig.row(mode+": enqueue status of a waiting job without a record, about "+fmt.Sprint(depth)+" deep", "%s (%.0f µs per waiting job ahead of it)",
		took.Round(time.Millisecond), float64(took.Microseconds())/float64(depth))
	return nil
}

// measure measures one window from now.
func (b *backlogRun) measure(ctx context.Context, window time.Duration) (drainWindow, error) {
	var d drainWindow
	intake, classes, err := b.waiting(ctx)
	if err != nil {
		return d, err
	}
	d.waiting = intake + classes
	cpu0, err := statCPU(b.nats.pid(), false)
	if err != nil {
		return d, err
	}
	t0, e0 := time.Now(), b.ev.ended()
	if err := sleepCtx(ctx, window); err != nil {
		return d, err
	}
	t1, e1 := time.Now(), b.ev.ended()
	cpu1, err := statCPU(b.nats.pid(), false)
	if err != nil {
		return d, err
	}
	if e1 == e0 {
		return d, fmt.Errorf("no job ended in %s; see %s", window, b.w.log.Name())
	}
	d.rate = float64(e1-e0) / t1.Sub(t0).Seconds()
	d.minSecond = b.ev.minSecond(t0, t1)
	d.ack = b.probe.between(t0, t1)
	d.natsCPUPerJob = (cpu1 - cpu0) / time.Duration(e1-e0)
	st, err := b.w.stats()
	d.workerRSS = st.RSS
	return d, err
}

// fairStarts publishes, behind the admitted backlog of team-a at priority
// 5, urgent jobs of team-a and jobs of team-b, and reports when each
// started in turnovers: the time the worker's 256 slots take to turn over
// at the deep window's rate.
func (b *backlogRun) fairStarts(ctx context.Context, fig *Figure, rate float64) (string, bool, error) {
	turnover := time.Duration(256 / rate * float64(time.Second))
	at := map[string]time.Time{}
	for _, p := range []struct {
		tenant   string
		priority int
	}{{"team-a", 1}, {"team-b", 3}} {
		for i := range 5 {
			id := fmt.Sprintf("probe-%s-%d-%d", p.tenant, p.priority, i)
			m := nats.NewMsg(contract.JobSubject("video"))
			m.Data = backlogSpec(id, p.tenant, p.priority)
			m.Header.Set(contract.HeaderMsgID, id)
			at[id] = time.Now()
			if _, err := b.st.js.PublishMsg(ctx, m); err != nil {
				return "", false, err
			}
		}
	}
	if err := b.ev.waitFor(ctx, 5*time.Minute, "the probes started", func() bool { return b.ev.startedCount("probe-") >= len(at) }); err != nil {
		return "", false, err
	}
	urgent, other := b.ev.slowestStart(at, "probe-team-a-"), b.ev.slowestStart(at, "probe-team-b-")
	fig.row("fair: behind the admitted backlog, slowest of 5 urgent (team-a, priority 1) / 5 of team-b, publish to start",
		"%s / %s (%.1f / %.1f turnovers of %s)", urgent.Round(time.Millisecond), other.Round(time.Millisecond),
		urgent.Seconds()/turnover.Seconds(), other.Seconds()/turnover.Seconds(), turnover.Round(time.Millisecond))
	ok := urgent <= 2*turnover && other <= 2*turnover
	return fmt.Sprintf("urgent %.1f, other tenant %.1f turnovers", urgent.Seconds()/turnover.Seconds(), other.Seconds()/turnover.Seconds()), ok, nil
}

// drainEvents counts the video jobs' terminal events per second and keeps
// when the probe jobs started.
type drainEvents struct {
	sub     *nats.Subscription
	mu      sync.Mutex
	total   int
	perSec  map[int64]int
	startAt map[string]time.Time
	tr      *tracker
}

func countDrain(nc *nats.Conn) (*drainEvents, error) {
	d := &drainEvents{perSec: map[int64]int{}, startAt: map[string]time.Time{}, tr: &tracker{changed: make(chan struct{}, 1)}}
	sub, err := subscribeEvents(nc, contract.EventsSubjectPrefix+"video.>", d.onEvent)
	d.sub = sub
	return d, err
}

func (d *drainEvents) onEvent(m *nats.Msg) {
	now := time.Now()
	status := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	d.mu.Lock()
	switch status {
	case "succeeded", "failed", "cancelled":
		d.total++
		d.perSec[now.Unix()]++
	case "submitted":
		id := strings.TrimSuffix(m.Header.Get(contract.HeaderMsgID), "."+status)
		if _, seen := d.startAt[id]; strings.HasPrefix(id, "probe-") && !seen {
			d.startAt[id] = now
		}
	}
	d.mu.Unlock()
	select {
	case d.tr.changed <- struct{}{}:
	default:
	}
}

func (d *drainEvents) close() { _ = d.sub.Unsubscribe() }

func (d *drainEvents) ended() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

func (d *drainEvents) waitFor(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	return d.tr.waitFor(ctx, within, what, cond)
}

// waitEnded waits until n jobs ended since the counter began.
func (d *drainEvents) waitEnded(ctx context.Context, n int, within time.Duration) error {
	return d.waitFor(ctx, within, fmt.Sprintf("%d terminal events", n), func() bool { return d.ended() >= n })
}

// minSecond is the fewest jobs ended in one whole second between t0 and t1.
func (d *drainEvents) minSecond(t0, t1 time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	lowest := -1
	for s := t0.Unix() + 1; s < t1.Unix(); s++ {
		if n := d.perSec[s]; lowest < 0 || n < lowest {
			lowest = n
		}
	}
	return max(lowest, 0)
}

func (d *drainEvents) startedCount(prefix string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for id := range d.startAt {
		if strings.HasPrefix(id, prefix) {
			n++
		}
	}
	return n
}

// slowestStart is the longest publish to start of the jobs of prefix.
func (d *drainEvents) slowestStart(published map[string]time.Time, prefix string) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	var slowest time.Duration
	for id, at := range published {
		if s, ok := d.startAt[id]; ok && strings.HasPrefix(id, prefix) {
			slowest = max(slowest, s.Sub(at))
		}
	}
	return slowest
}

// percentiles of a set of durations.
type percentiles struct{ p50, p99, max time.Duration }

func percentilesOf(ds []time.Duration) percentiles {
	if len(ds) == 0 {
		return percentiles{}
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds))))] }
	return percentiles{p50: at(0.50), p99: at(0.99), max: ds[len(ds)-1]}
}
