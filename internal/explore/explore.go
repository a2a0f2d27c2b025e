package explore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// logTail is how much of the workers' logs a failed schedule shows
// (its last bytes).
var logTail = 16 << 10

// Result is what one schedule found.
type Result struct {
	Seed       uint64
	Points     []string   // decision points met
	Faults     []Decision // the non-normal choices, in the order made
	Violations []Violation
	Workers    int // workers started (1 + crashes)
}

// Run plays the schedule of seed against a world of its own (NATS,
// simulators; s3 is shared, under the seed's prefix) and checks it.
func Run(t testing.TB, seed uint64, s3 *testenv.S3Env) Result {
	r := newRun(t, seed, s3)
	ctx, cancel := context.WithTimeout(context.Background(), 3*settleBound)
	defer cancel()
	evs, err := r.play(ctx)
	close(r.done)
	r.stopWorkers()
	if err != nil {
		t.Errorf("seed %d: %v", seed, err)
	}
	// Read again once every worker is gone: nothing can publish now.
	if final, err := r.events(ctx); err == nil {
		evs = final
	}
	res := Result{Seed: seed, Violations: r.check(evs, r.submits(ctx))}
	res.Points, res.Faults = r.sched.points()
	r.mu.Lock()
	res.Workers = len(r.workers)
	r.mu.Unlock()
	if t.Failed() || len(res.Violations) > 0 {
		logs := r.logs.String()
		t.Logf("seed %d worker logs (last 16 KiB):\n%s", seed, logs[max(0, len(logs)-logTail):])
	}
	return res
}

// submits is each job's record's count of submissions sent upstream.
func (r *run) submits(ctx context.Context) map[string]int {
	out := map[string]int{}
	kv, err := r.nats.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		return out
	}
	store := state.NewStore(kv, "explore", time.Now)
	for _, j := range r.jobs {
		if rec, _, err := store.Get(ctx, j.id); err == nil {
			out[j.id] = rec.Submits
		}
	}
	return out
}

// stopWorkers ends every worker, the dead ones included, and waits until
// each has returned.
func (r *run) stopWorkers() {
	r.mu.Lock()
	ws := append([]*workerRun(nil), r.workers...)
	r.mu.Unlock()
	for _, w := range ws {
		w.cancel()
	}
	for _, w := range ws {
		select {
		case <-w.exited:
		case <-time.After(30 * time.Second):
			r.t.Errorf("seed %d: worker %s did not stop in 30s", r.seed, w.name)
		}
	}
}

// Tally sums the results of many schedules.
type Tally struct {
	mu         sync.Mutex
	Schedules  int
	points     map[string]bool
	Violations int
	Failed     []Result
}

// Add counts res.
func (t *Tally) Add(res Result) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.points == nil {
		t.points = map[string]bool{}
	}
	t.Schedules++
	for _, p := range res.Points {
		t.points[p] = true
	}
	t.Violations += len(res.Violations)
	if len(res.Violations) > 0 {
		t.Failed = append(t.Failed, res)
	}
}

// Points is how many distinct decision points the schedules reached.
func (t *Tally) Points() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.points)
}

// Replay is the command that replays seed's schedule.
func Replay(seed uint64) string {
	return fmt.Sprintf("go test ./internal/explore -run 'TestExplore$' -count=1 -explore.seed=%d", seed)
}
