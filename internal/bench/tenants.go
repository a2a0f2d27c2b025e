package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/contract"
)

// The tenants figure's fleet: three workers sharing a fleet quota of media
// tasks, against a simulator whose tasks take taskTime. A slot turns over
// once per task time, plus the poll that sees the task end, plus the read
// of the fleet's quota board that lets the next job start (every 250 ms
// while jobs wait, internal/quota).
const (
	tenantQuota    = 8
	tenantTaskTime = 2 * time.Second
	tenantPoll     = time.Second
	tenantTurnover = tenantTaskTime + tenantPoll + 250*time.Millisecond
)

// tenants measures T1: the order of starts between tenants and priorities,
// weighted shares, and budgets (docs/tenants.md, docs/lifecycle.md).
func (r *run) tenants(ctx context.Context) (*Figure, error) {
	fig := &Figure{ID: "T1", Title: "tenants: order of starts, shares and budgets, 3 workers",
		Target: "urgent jobs start within one quota turnover, another tenant's first within two; shares 25/75 ± 5 points over any 200 starts; spend = sum of events' cost"}
	fig.Settings = []string{
		fmt.Sprintf("SLUICE_FLEET_MEDIA_TASKS=%d, SLUICE_POLL_INTERVAL=%s, SLUICE_POLL_FIRST=250ms on every worker; the simulator's tasks take %s", tenantQuota, tenantPoll, tenantTaskTime),
		fmt.Sprintf("a quota turnover is a task's time, one poll interval and one read of the quota board (250 ms): %s", tenantTurnover),
	}
	met := true
	var measured []string
	for _, phase := range []func(context.Context, *Figure) (string, bool, error){r.tenantOrder, r.tenantShares, r.tenantBudget} {
		m, ok, err := phase(ctx, fig)
		if err != nil {
			return fig, err
		}
		met = met && ok
		measured = append(measured, m)
	}
	fig.Measured, fig.Met = strings.Join(measured, "; "), met
	return fig, nil
}

// tenantFleet is one phase's stack, three workers and a tracker of every
// event's tenant, cost and error.
type tenantFleet struct {
	st      *stack
	workers []*worker
	ev      *tenantEvents
}

func (r *run) startTenantFleet(ctx context.Context, name string) (_ *tenantFleet, err error) {
	st, err := newStack(ctx, r.scenarioDir(name), stackOptions{Media: apisim.MediaConfig{ResultSize: 1 << 10, TaskDuration: tenantTaskTime}})
	if err != nil {
		return nil, err
	}
	f := &tenantFleet{st: st}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if f.ev, err = trackTenantEvents(st.nc); err != nil {
		return nil, err
	}
	env := map[string]string{
		"SLUICE_FLEET_MEDIA_TASKS": strconv.Itoa(tenantQuota),
		"SLUICE_POLL_INTERVAL":     tenantPoll.String(),
		"SLUICE_POLL_FIRST":        "250ms",
	}
	for i := range 3 {
		w, err := r.startWorker(ctx, st, fmt.Sprintf("%s-worker-%d", name, i), env)
		if err != nil {
			return nil, err
		}
		f.workers = append(f.workers, w)
	}
	return f, nil
}

func (f *tenantFleet) close() {
	for _, w := range f.workers {
		w.stop(30 * time.Second)
	}
	if f.ev != nil {
		f.ev.close()
	}
	f.st.close()
}

// enqueue runs the enqueue CLI in this process against the fleet's NATS
// and returns its standard output.
func (f *tenantFleet) enqueue(ctx context.Context, args ...string) (string, error) {
	return f.st.enqueue(ctx, args...)
}

// publish publishes n video jobs of tenant at priority, ids prefix-00000...,
// and returns when each was published.
func (f *tenantFleet) publish(ctx context.Context, prefix, tenant string, priority, n int) (map[string]time.Time, error) {
	at := make(map[string]time.Time, n)
	var futures []jetstream.PubAckFuture
	for _, id := range jobIDs(prefix, n) {
		var spec map[string]any
		_ = json.Unmarshal(videoSpec(id, ""), &spec)
		spec["tenant"], spec["priority"] = tenant, priority
		m := nats.NewMsg(contract.JobSubject("video"))
		m.Data, _ = json.Marshal(spec)
		m.Header.Set(contract.HeaderMsgID, id)
		at[id] = time.Now()
		fu, err := f.st.js.PublishMsgAsync(m)
		if err != nil {
			return nil, fmt.Errorf("publish %s: %w", id, err)
		}
		futures = append(futures, fu)
	}
	select {
	case <-f.st.js.PublishAsyncComplete():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for _, fu := range futures {
		select {
		case err := <-fu.Err():
			return nil, err
		default:
		}
	}
	return at, nil
}

// tenantOrder: tenant A publishes a long priority-5 backlog, then tenant
// B a few priority-3 jobs, then A a few priority-1 jobs.
func (r *run) tenantOrder(ctx context.Context, fig *Figure) (string, bool, error) {
	backlog, bJobs, urgent := pick(r, 5000, 400), pick(r, 50, 10), pick(r, 10, 5)
	f, err := r.startTenantFleet(ctx, "t1order")
	if err != nil {
		return "", false, err
	}
	defer f.close()
	if _, err := f.publish(ctx, "a5", "team-a", 5, backlog); err != nil {
		return "", false, err
	}
	bAt, err := f.publish(ctx, "b3", "team-b", 3, bJobs)
	if err != nil {
		return "", false, err
	}
	uAt, err := f.publish(ctx, "a1", "team-a", 1, urgent)
	if err != nil {
		return "", false, err
	}
	within := time.Duration(bJobs+urgent)*tenantTurnover + 5*time.Minute
	if err := f.ev.waitFor(ctx, within, "tenant B's jobs ended", func() bool { return f.ev.ended("b3") >= bJobs && f.ev.ended("a1") >= urgent }); err != nil {
		return "", false, err
	}
	// One quota's worth of the urgent jobs can start in one turnover; the
	// rest need the next.
	delays := f.ev.startDelays(uAt)
	urgentWait, slowest := delays[min(urgent, tenantQuota)-1], delays[len(delays)-1]
	bFirst := f.ev.startDelays(bAt)[0]
	aEnded := f.ev.ended("a5")
	fig.row(fmt.Sprintf("order: A's first %d priority-1 jobs (one quota), publish to start", min(urgent, tenantQuota)),
		"%s (%.1f turnovers); all %d: %s", urgentWait.Round(10*time.Millisecond), turnovers(urgentWait), urgent, slowest.Round(10*time.Millisecond))
	fig.row("order: B's first job, publish to start", "%s (%.1f turnovers)", bFirst.Round(10*time.Millisecond), turnovers(bFirst))
	fig.row("order: A's backlog jobs ended when B's last ended", "%d of %d", aEnded, backlog)
	ok := urgentWait <= tenantTurnover && bFirst <= 2*tenantTurnover && aEnded < backlog
	return fmt.Sprintf("urgent %.1f, B first %.1f turnovers, A backlog %d/%d ended when B's %d ended",
		turnovers(urgentWait), turnovers(bFirst), aEnded, backlog, bJobs), ok, nil
}

// tenantShares: two backlogged tenants of weights 1 and 3, the lighter
// one's backlog published first.
func (r *run) tenantShares(ctx context.Context, fig *Figure) (string, bool, error) {
	each, starts := pick(r, 1000, 300), pick(r, 600, 200)
	f, err := r.startTenantFleet(ctx, "t1shares")
	if err != nil {
		return "", false, err
	}
	defer f.close()
	for _, set := range [][]string{{"light", "1"}, {"heavy", "3"}} {
		if _, err := f.enqueue(ctx, "tenants", "set", set[0], "--weight", set[1]); err != nil {
			return "", false, err
		}
	}
	if _, err := f.publish(ctx, "w1", "light", 3, each); err != nil {
		return "", false, err
	}
	if _, err := f.publish(ctx, "w3", "heavy", 3, each); err != nil {
		return "", false, err
	}
	within := time.Duration(starts/tenantQuota+1)*tenantTurnover + 5*time.Minute
	if err := f.ev.waitFor(ctx, within, fmt.Sprintf("%d starts", starts), func() bool { return f.ev.started() >= starts }); err != nil {
		return "", false, err
	}
	// Until the heavier tenant's first job is admitted, only the lighter
	// one's can start: the windows count from the first start of each.
	alone := f.ev.startsBefore("w3")
	if err := f.ev.waitFor(ctx, within, fmt.Sprintf("%d starts", alone+starts), func() bool { return f.ev.started() >= alone+starts }); err != nil {
		return "", false, err
	}
	lo, hi := f.ev.shareRange("w1", 200, alone, alone+starts)
	fig.row("shares: starts before the weight-3 tenant's first (its jobs still being admitted)", "%d, all the weight-1 tenant's", alone)
	fig.row("shares: weight-1 tenant's share over any 200 consecutive starts", "%.1f–%.1f %% (target 25 ± 5) over the next %d starts", lo*100, hi*100, starts)
	ok := lo >= 0.20 && hi <= 0.30
	return fmt.Sprintf("weight-1 share %.1f–%.1f %%", lo*100, hi*100), ok, nil
}

// tenantBudget: a price table making a job cost 5 credits and two tenants
// with budgets covering 40 jobs each, one waiting for budget past it and
// one failing.
func (r *run) tenantBudget(ctx context.Context, fig *Figure) (string, bool, error) {
	const covered, jobs = 40, 60
	f, err := r.startTenantFleet(ctx, "t1budget")
	if err != nil {
		return "", false, err
	}
	defer f.close()
	steps := [][]string{
		{"prices", "set", "video.768P.second=1"},
		{"tenants", "set", "waits", "--budget", "200", "--per", "day", "--on-budget", "wait"},
		{"tenants", "set", "fails", "--budget", "200", "--per", "day", "--on-budget", "fail"},
	}
	for _, s := range steps {
		if _, err := f.enqueue(ctx, s...); err != nil {
			return "", false, err
		}
	}
	for _, t := range []string{"waits", "fails"} {
		if _, err := f.publish(ctx, t, t, 3, jobs); err != nil {
			return "", false, err
		}
	}
	within := time.Duration(2*jobs/tenantQuota+1)*tenantTurnover + 5*time.Minute
	if err := f.ev.waitFor(ctx, within, "budgets spent", func() bool {
		return f.ev.ended("waits") >= covered && f.ev.ended("fails") >= jobs
	}); err != nil {
		return "", false, err
	}
	// Long enough for a job past the budget to be submitted, were it to be.
	if err := sleepCtx(ctx, 3*tenantTurnover); err != nil {
		return "", false, err
	}
	waitsStarted, failsCode := f.ev.startedWith("waits"), f.ev.codes("fails")
	spend, err := f.spendByTenant(ctx)
	if err != nil {
		return "", false, err
	}
	eventCost := f.ev.costByTenant()
	fig.row("budget (wait): jobs submitted of 60, budget covering 40", "%d", waitsStarted)
	fig.row("budget (fail): jobs failed budget_exhausted of 60", "%d", failsCode["budget_exhausted"])
	fig.row("budget: enqueue spend / sum of terminal events' cost", "waits %.2f / %.2f; fails %.2f / %.2f",
		spend["waits"], eventCost["waits"], spend["fails"], eventCost["fails"])
	equal := sameCredits(spend["waits"], eventCost["waits"]) && sameCredits(spend["fails"], eventCost["fails"])
	ok := waitsStarted == covered && failsCode["budget_exhausted"] == jobs-covered && equal
	return fmt.Sprintf("budget: %d of %d submitted (wait), %d failed budget_exhausted (fail), spend equal to events' cost: %v",
		waitsStarted, jobs, failsCode["budget_exhausted"], equal), ok, nil
}

// spendByTenant reads "enqueue spend --by tenant --json".
func (f *tenantFleet) spendByTenant(ctx context.Context) (map[string]float64, error) {
	out, err := f.enqueue(ctx, "spend", "--by", "tenant", "--since", "24h", "--json")
	if err != nil {
		return nil, err
	}
	var res struct {
		Spend []struct {
			Key     string  `json:"key"`
			Credits float64 `json:"credits"`
		} `json:"spend"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		return nil, fmt.Errorf("enqueue spend --json: %w: %q", err, out)
	}
	spend := map[string]float64{}
	for _, row := range res.Spend {
		spend[row.Key] = row.Credits
	}
	return spend, nil
}

// sameCredits compares two sums of the same costs added in another order.
func sameCredits(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func turnovers(d time.Duration) float64 { return d.Seconds() / tenantTurnover.Seconds() }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tenantEvents follows every event: when each job was submitted (its
// start), in order, and each terminal event's status, cost and error code.
type tenantEvents struct {
	sub     *nats.Subscription
	mu      sync.Mutex
	starts  []string
	startAt map[string]time.Time
	ends    map[string]tenantEnd
	changed chan struct{}
}

type tenantEnd struct {
	tenant, status, code string
	cost                 float64
}

func trackTenantEvents(nc *nats.Conn) (*tenantEvents, error) {
	t := &tenantEvents{startAt: map[string]time.Time{}, ends: map[string]tenantEnd{}, changed: make(chan struct{}, 1)}
	sub, err := subscribeEvents(nc, contract.EventsSubjectPrefix+">", t.onEvent)
	t.sub = sub
	return t, err
}

// subscribeEvents subscribes cb to subject with no limit on the messages
// pending in the client (a figure must not lose an event), and flushes.
func subscribeEvents(nc *nats.Conn, subject string, cb nats.MsgHandler) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(subject, cb)
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	return sub, nc.Flush()
}

func (t *tenantEvents) onEvent(m *nats.Msg) {
	now := time.Now()
	var ev struct {
		Data struct {
			JobID  string   `json:"job_id"`
			Status string   `json:"status"`
			Tenant string   `json:"tenant"`
			Cost   *float64 `json:"cost"`
			Error  *struct {
				Code string `json:"code"`
			} `json:"error"`
		} `json:"data"`
	}
	if json.Unmarshal(m.Data, &ev) != nil {
		return
	}
	d := ev.Data
	t.mu.Lock()
	switch d.Status {
	case "submitted":
		if _, seen := t.startAt[d.JobID]; !seen {
			t.startAt[d.JobID] = now
			t.starts = append(t.starts, d.JobID)
		}
	case "succeeded", "failed", "cancelled":
		if _, seen := t.ends[d.JobID]; !seen {
			end := tenantEnd{tenant: d.Tenant, status: d.Status}
			if d.Cost != nil {
				end.cost = *d.Cost
			}
			if d.Error != nil {
				end.code = d.Error.Code
			}
			t.ends[d.JobID] = end
		}
	}
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

func (t *tenantEvents) close() { _ = t.sub.Unsubscribe() }

func (t *tenantEvents) waitFor(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	tr := &tracker{changed: t.changed}
	return tr.waitFor(ctx, within, what, cond)
}

// ended counts the terminal events of jobs whose id starts with prefix.
func (t *tenantEvents) ended(prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for id := range t.ends {
		if strings.HasPrefix(id, prefix+"-") {
			n++
		}
	}
	return n
}

func (t *tenantEvents) started() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.starts)
}

func (t *tenantEvents) startedWith(prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, id := range t.starts {
		if strings.HasPrefix(id, prefix+"-") {
			n++
		}
	}
	return n
}

// startDelays returns, for each published job that started, its publish
// to start time.
func (t *tenantEvents) startDelays(published map[string]time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for id, at := range published {
		if s, ok := t.startAt[id]; ok {
			out = append(out, s.Sub(at))
		}
	}
	slices.Sort(out)
	return out
}

// startsBefore counts the starts before the first of prefix's jobs.
func (t *tenantEvents) startsBefore(prefix string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, id := range t.starts {
		if strings.HasPrefix(id, prefix+"-") {
			return i
		}
	}
	return len(t.starts)
}

// shareRange returns the lowest and highest share of prefix's jobs among
// every window of consecutive starts from start from to start to.
func (t *tenantEvents) shareRange(prefix string, window, from, to int) (lo, hi float64) {
	t.mu.Lock()
	starts := slices.Clone(t.starts[min(from, len(t.starts)):min(to, len(t.starts))])
	t.mu.Unlock()
	lo, hi = 1, 0
	for i := 0; i+window <= len(starts); i++ {
		k := 0
		for _, id := range starts[i : i+window] {
			if strings.HasPrefix(id, prefix+"-") {
				k++
			}
		}
		share := float64(k) / float64(window)
		lo, hi = min(lo, share), max(hi, share)
	}
	return lo, hi
}

func (t *tenantEvents) codes(prefix string) map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for id, e := range t.ends {
		if strings.HasPrefix(id, prefix+"-") && e.code != "" {
			out[e.code]++
		}
	}
	return out
}

func (t *tenantEvents) costByTenant() map[string]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]float64{}
	for _, e := range t.ends {
		out[e.tenant] += e.cost
	}
	return out
}
