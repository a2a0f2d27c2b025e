package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// hookSink is a webhook receiver in the harness: it verifies every POST
// with the Standard Webhooks reference library and notes when each
// webhook-id first arrived and how many times. While down it answers 503.
type hookSink struct {
	srv  *http.Server
	url  string
	down atomic.Bool

	mu     sync.Mutex
	wh     *standardwebhooks.Webhook
	first  map[string]time.Time
	copies int
	bad    int
}

func newHookSink() (*hookSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookSink{first: map[string]time.Time{}, url: "http://" + ln.Addr().String() + "/hook"}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = h.srv.Serve(ln) }()
	return h, nil
}

func (h *hookSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(r.Body)
	if h.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wh == nil || h.wh.Verify(body, r.Header) != nil {
		h.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := r.Header.Get("webhook-id")
	if _, ok := h.first[id]; ok {
		h.copies++
	} else {
		h.first[id] = now
	}
	w.WriteHeader(http.StatusNoContent)
}

// counts returns the distinct webhook-ids received, the extra copies and
// the deliveries that failed verification.
func (h *hookSink) counts() (distinct, copies, bad int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.first), h.copies, h.bad
}

func (h *hookSink) at(id string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.first[id]
	return t, ok
}

func (h *hookSink) close() { _ = h.srv.Close() }

// subscribe adds a subscription of every event to h in st's buckets, which
// a worker has set up.
func (h *hookSink) subscribe(ctx context.Context, st *stack) error {
	store, err := webhooks.Open(ctx, st.js)
	if err != nil {
		return err
	}
	sub, err := store.Add(ctx, webhooks.Subscription{URL: h.url}, time.Now())
	if err != nil {
		return err
	}
	wh, err := standardwebhooks.NewWebhook(sub.Secret)
	h.mu.Lock()
	h.wh = wh
	h.mu.Unlock()
	// The workers' caches follow the bucket; give them a moment.
	time.Sleep(500 * time.Millisecond)
	return err
}

// waitFor polls cond every 100ms until it holds or within passes.
func waitFor(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, within)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// webhookLatency measures W1: a job's terminal event → 2xx at a receiver,
// with jobs arriving at 100 a second.
func (r *run) webhookLatency(ctx context.Context) (*Figure, error) {
	fig := &Figure{ID: "W1", Title: "webhook latency, terminal event → 2xx at the receiver, 100 jobs/s", Target: "median ≤ 50 ms", Settings: throughputSettings}
	n := pick(r, 3000, 300)
	st, err := newStack(ctx, r.scenarioDir("w1"), stackOptions{Media: apisim.MediaConfig{ResultSize: 16 << 10}})
	if err != nil {
		return fig, err
	}
	defer st.close()
	w, err := r.startWorker(ctx, st, "w1", throughputEnv)
	if err != nil {
		return fig, err
	}
	defer w.stop(30 * time.Second)
	sink, err := newHookSink()
	if err != nil {
		return fig, err
	}
	defer sink.close()
	if err := sink.subscribe(ctx, st); err != nil {
		return fig, err
	}
	tr, err := st.track("w1")
	if err != nil {
		return fig, err
	}
	defer tr.close()
	ids := jobIDs("w1", n)
	tick := time.NewTicker(10 * time.Millisecond)
	for _, id := range ids {
		<-tick.C
		if _, err := st.publishJobs(ctx, []string{id}, instant); err != nil {
			tick.Stop()
			return fig, err
		}
	}
	tick.Stop()
	if err := waitFor(ctx, 5*time.Minute, "every job's terminal event delivered", func() bool {
		for _, id := range ids {
			if _, ok := sink.at(contract.EventID(id, "succeeded")); !ok {
				return false
			}
		}
		return true
	}); err != nil {
		return fig, err
	}
	var lat []time.Duration
	for _, id := range ids {
		end, ok1 := tr.at("succeeded", id)
		got, ok2 := sink.at(contract.EventID(id, "succeeded"))
		if ok1 && ok2 {
			lat = append(lat, got.Sub(end))
		}
	}
	slices.Sort(lat)
	all, copies, bad := sink.counts()
	med, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
	fig.Measured = fmt.Sprintf("median %s, p99 %s", ms(med), ms(p99))
	fig.Met = med <= 50*time.Millisecond
	fig.row("deliveries timed", "%d", len(lat))
	fig.row("median / p99 / max", "%s / %s / %s", ms(med), ms(p99), ms(lat[len(lat)-1]))
	fig.row("deliveries (every event of every job) / extra copies / failed verification", "%d / %d / %d", all, copies, bad)
	fig.Notes = append(fig.Notes, fmt.Sprintf("%d video jobs published at 100 a second (simulator task time 0) to one worker "+
		"with webhooks on (the default), one subscription to every event, a receiver in the harness "+
		"verifying each POST with the Standard Webhooks reference library. The time runs from the terminal event's arrival at a "+
		"core subscriber in the harness to the receiver's first sight of its webhook-id.", n))
	return fig, nil
}

// webhookOutage measures W2: one receiver down while events flow, then
// back; every delivery arrives, and the other receiver's latency while
// it is down.
func (r *run) webhookOutage(ctx context.Context) (*Figure, error) {
	n, outage := pick(r, 10000, 600), pick(r, r.outage(10*time.Minute), 20*time.Second)
	fig := &Figure{ID: "W2", Title: fmt.Sprintf("webhooks, %d deliveries with a receiver down %s", n, outage),
		Target: "all delivered, none lost; the other receiver's latency unchanged"}
	st, err := newStack(ctx, r.scenarioDir("w2"), stackOptions{})
	if err != nil {
		return fig, err
	}
	defer st.close()
	w, err := r.startWorker(ctx, st, "w2", nil)
	if err != nil {
		return fig, err
	}
	defer w.stop(30 * time.Second)
	down, up, err := twoSinks(ctx, st)
	if err != nil {
		return fig, err
	}
	defer down.close()
	defer up.close()
	base, err := st.publishEvents(ctx, "w2-base", 200, time.Second/100)
	if err != nil {
		return fig, err
	}
	if err := waitFor(ctx, time.Minute, "the baseline delivered", func() bool { d, _, _ := up.counts(); return d >= 200 }); err != nil {
		return fig, err
	}
	down.down.Store(true)
	rate := max(time.Duration(int64(outage)/int64(n)), time.Millisecond)
	during, err := st.publishEvents(ctx, "w2-out", n, rate)
	if err != nil {
		return fig, err
	}
	if rest := outage - time.Since(during["w2-out-00000"]); rest > 0 {
		time.Sleep(rest)
	}
	down.down.Store(false)
	back := time.Now()
	if err := waitFor(ctx, 30*time.Minute, "the down receiver's backlog", func() bool { d, _, _ := down.counts(); return d >= n+200 }); err != nil {
		return fig, err
	}
	drained := time.Since(back)
	baseLat, outLat := sinkLatency(up, base), sinkLatency(up, during)
	dd, dc, db := down.counts()
	ud, uc, ub := up.counts()
	fig.Measured = fmt.Sprintf("%d of %d delivered; other receiver median %s → %s", dd-200, n, ms(quantile(baseLat, 0.5)), ms(quantile(outLat, 0.5)))
	fig.Met = dd == n+200 && ud == n+200 && db == 0 && ub == 0
	fig.row("down receiver: distinct / extra copies / bad signature", "%d / %d / %d", dd, dc, db)
	fig.row("up receiver: distinct / extra copies / bad signature", "%d / %d / %d", ud, uc, ub)
	fig.row("up receiver before the outage: median / p99", "%s / %s", ms(quantile(baseLat, 0.5)), ms(quantile(baseLat, 0.99)))
	fig.row("up receiver during the outage: median / p99", "%s / %s", ms(quantile(outLat, 0.5)), ms(quantile(outLat, 0.99)))
	fig.row("backlog delivered after the receiver came back", "%s", drained.Round(time.Second))
	fig.Notes = append(fig.Notes, fmt.Sprintf("Two subscriptions of every event, one worker with the default webhook settings. "+
		"200 events at 100/s as a baseline, then %d events spread over %s while one receiver answers 503, then it answers again. "+
		"Events are published straight into SLUICE_EVENTS (no jobs run) so that the figure is the webhooks' alone. The backlog "+
		"waits for the destination's next probe (the retry schedule: 5 s, 30 s, 2 min, 10 min, ...), then flows.", n, outage))
	return fig, nil
}

// outage is the W2 outage: the harness's WebhookOutage when set, else
// def.
func (r *run) outage(def time.Duration) time.Duration {
	if r.o.WebhookOutage > 0 {
		return r.o.WebhookOutage
	}
	return def
}

func twoSinks(ctx context.Context, st *stack) (down, up *hookSink, err error) {
	if down, err = newHookSink(); err != nil {
		return nil, nil, err
	}
	if up, err = newHookSink(); err != nil {
		down.close()
		return nil, nil, err
	}
	for _, h := range []*hookSink{down, up} {
		if err := h.subscribe(ctx, st); err != nil {
			down.close()
			up.close()
			return nil, nil, err
		}
	}
	return down, up, nil
}

// sinkLatency is each event's publish → first arrival at h, sorted.
func sinkLatency(h *hookSink, published map[string]time.Time) []time.Duration {
	var lat []time.Duration
	for id, at := range published {
		if got, ok := h.at(id); ok {
			lat = append(lat, got.Sub(at))
		}
	}
	slices.Sort(lat)
	return lat
}

// publishEvents stores n succeeded events of jobs prefix-NNNNN in
// SLUICE_EVENTS, one every every, and returns when each was published,
// by event id.
func (s *stack) publishEvents(ctx context.Context, prefix string, n int, every time.Duration) (map[string]time.Time, error) {
	at := make(map[string]time.Time, n)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for _, job := range jobIDs(prefix, n) {
		<-tick.C
		id := contract.EventID(job, "succeeded")
		data, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": id, "source": "sluice/worker", "type": "sluice.job.succeeded",
			"subject": job, "time": time.Now().UTC().Format(time.RFC3339Nano), "datacontenttype": "application/json",
			"data": map[string]any{"job_id": job, "kind": "video", "status": "succeeded", "tenant": "default"}})
		m := nats.NewMsg(contract.EventSubject("video", "succeeded"))
		m.Data = data
		m.Header.Set(contract.HeaderMsgID, id)
		at[id] = time.Now()
		if _, err := s.js.PublishMsg(ctx, m); err != nil {
			return at, err
		}
	}
	return at, nil
}
