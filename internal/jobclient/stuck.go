package jobclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/state"
)

// listStuck lists the jobs a worker's watchdog found stuck at the step
// they are still at (state.Record.StuckNow), those stuck longest first,
// with o's kind, status, tenant, label and limit filters. A stuck job may
// have no event at all (it is stuck before its submit), so it reads the
// latest record of every job in SLUICE_STATE, once each: a scan, for an
// operator's question, not for a dashboard's refresh.
func (c *Client) listStuck(ctx context.Context, o ListOptions) (*JobList, error) {
	kv, err := c.js.KeyValue(ctx, contract.StateBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w (bucket %s does not exist)", ErrNotSetUp, contract.StateBucket)
	}
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("open bucket %s: %w", contract.StateBucket, err))
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := kv.WatchAll(wctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("read bucket %s: %w", contract.StateBucket, err))
	}
	defer func() { _ = w.Stop() }()
	var out []Job
	// Each record must come within the bound of one request: a stream
	// that stops answering ends the scan instead of holding it.
	idle := time.NewTimer(natsconn.RequestTimeout)
	defer idle.Stop()
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				return stuckList(out, o, c.now()), nil
			}
			idle.Reset(natsconn.RequestTimeout)
			var r state.Record
			if json.Unmarshal(e.Value(), &r) != nil || !r.StuckNow() {
				continue
			}
			if j := JobFromRecord(&r); (o.Kind == "" || j.Kind == string(o.Kind)) && o.matches(&j) {
				out = append(out, j)
			}
		case <-idle.C:
			return nil, fmt.Errorf("read bucket %s: no answer within %s", contract.StateBucket, natsconn.RequestTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// stuckList is the JobList of the stuck jobs out, stuck longest first.
func stuckList(out []Job, o ListOptions, now time.Time) *JobList {
	slices.SortFunc(out, func(a, b Job) int { return a.Stuck.Since.Compare(b.Stuck.Since) })
	res := &JobList{Matched: len(out), Complete: true, Since: now.Add(-o.Since).UTC(), Jobs: []Job{}}
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	res.Jobs = append(res.Jobs, out...)
	return res
}
