package quota_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// opCounts sums the Count calls of several fleets.
type opCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *opCounts) count(key, op, outcome string) {
	c.mu.Lock()
	c.n[key+" "+op+" "+outcome]++
	c.mu.Unlock()
}

func (c *opCounts) get(what string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[what]
}

// TestManyWorkersShareOneBoard runs 16 workers' sides of the quota, each
// on a connection of its own, against one board of 5 media tasks, through
// a proxy that drops the answers to a few of their writes after the server
// applied them: every one of 160 jobs gets a lease, no more than 5 hold
// one at once, and once all are released the board holds none (a write
// whose answer was lost was recognised on the next read, not granted or
// released twice).
func TestManyWorkersShareOneBoard(t *testing.T) {
	t.Parallel()
	const workers, jobs, limit = 16, 160, 5
	b := setup(t)
	drop := testenv.StartReplyDropper(t, strings.TrimPrefix(b.js.Conn().ConnectedUrl(), "nats://"))
	ctx := testenv.Context(t, 2*time.Minute)
	counts := &opCounts{n: map[string]int{}}
	var fleets []*quota.Fleet
	for i := range workers {
		js := drop.JetStream(t)
		kv, err := js.KeyValue(ctx, quota.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := runFleet(t, quota.Config{
			KV: kv, Conn: js.Conn(), Holder: "w" + string(rune('a'+i)), Limits: quota.Limits{MediaTasks: limit},
			TTL: time.Minute, Now: b.clock.Now, Clock: b.server, Count: counts.count,
		})
		fleets = append(fleets, f)
	}
	run := runJobs(ctx, t, fleets, jobs)
	for range 3 {
		// Lose the answers to a few writes of the board while the jobs run.
		time.Sleep(200 * time.Millisecond)
		drop.Arm("$KV."+quota.Bucket+".leases.", 1)
	}
	run.wait()
	if n := run.granted.Load(); n != jobs {
		t.Fatalf("%d of %d jobs got a lease", n, jobs)
	}
	if p := run.peak.Load(); p > limit {
		t.Fatalf("%d jobs held a lease at once, limit %d", p, limit)
	}
	eventually(t, "every lease given back", func() bool { return read(t, b, quota.Media).InUse == 0 })
	if counts.get("leases.media write lost") == 0 {
		t.Errorf("no write's answer was lost (%d dropped): the test lost its point", drop.Dropped())
	}
	t.Logf("%d answers dropped; board operations: %v", drop.Dropped(), counts.n)
}
