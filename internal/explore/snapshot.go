package explore

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/quota"
)

// snapshot is what a schedule's world looked like when its wait gave up
// with jobs not ended, taken before the workers stop: the jobs' state
// records, the quota board and the jobs consumers. A lost job seen once
// under load and never in its replay is then explained by the run itself.
func (r *run) snapshot(ctx context.Context, evs []events.Event) string {
	var b strings.Builder
	ended := map[string]bool{}
	for _, e := range evs {
		if terminal(e.Data.Status) {
			ended[e.Data.JobID] = true
		}
	}
	r.mu.Lock()
	jobs := append([]job(nil), r.jobs...)
	for _, w := range r.workers {
		fmt.Fprintf(&b, "worker %s dead=%v\n", w.name, w.isDead())
	}
	r.mu.Unlock()
	fmt.Fprintf(&b, "quiet for %s\n", r.sched.quietFor().Round(100e6))
	for _, j := range jobs {
		if !ended[j.id] {
			b.WriteString("state " + j.id + ": " + r.rawValue(ctx, contract.StateBucket, j.id) + "\n")
		}
	}
	if kv, err := r.nats.JS.KeyValue(ctx, quota.Bucket); err == nil {
		keys, _ := kv.Keys(ctx)
		for _, k := range keys {
			b.WriteString("quota " + k + ": " + r.rawValue(ctx, quota.Bucket, k) + "\n")
		}
	}
	if s, err := r.nats.JS.Stream(ctx, contract.JobsStream); err == nil {
		for c := range s.ListConsumers(ctx).Info() {
			fmt.Fprintf(&b, "consumer %s: pending %d, ack pending %d, redelivered %d, waiting %d\n",
				c.Name, c.NumPending, c.NumAckPending, c.NumRedelivered, c.NumWaiting)
		}
	}
	return b.String()
}

// rawValue is key's value in bucket as stored, or why it is not there.
func (r *run) rawValue(ctx context.Context, bucket, key string) string {
	kv, err := r.nats.JS.KeyValue(ctx, bucket)
	if err != nil {
		return err.Error()
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return err.Error()
	}
	return string(e.Value())
}
