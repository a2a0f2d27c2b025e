package jobclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// benchJobs is the backlog of BenchmarkListFailed: 100,000 jobs, each with
// a state record and its submitted and terminal events; one in a hundred
// failed.
const benchJobs = 100_000

// BenchmarkListFailed measures "enqueue jobs --status failed --since 1h"
// (ListJobs) against a store holding 100,000 jobs, all of them inside the
// hour (the worst case for the time filter): the server hands over only
// the failed events, so the cost follows the failed jobs (1,000), not the
// backlog. /newest is the default page (the newest 50 jobs of the hour),
// /all every job of the hour, reading all 200,000 events.
func BenchmarkListFailed(b *testing.B) {
	n := testenv.StartNATS(b)
	ctx := context.Background()
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		b.Fatal(err)
	}
	fill(b, n)
	c, err := jobclient.Dial(ctx, jobclient.Config{URL: n.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, bc := range []struct {
		name   string
		o      jobclient.ListOptions
		wanted int
	}{
		{"failed", jobclient.ListOptions{Status: "failed", Since: time.Hour}, benchJobs / 100},
		{"newest", jobclient.ListOptions{Since: time.Hour}, 50},
		{"all", jobclient.ListOptions{Since: time.Hour, Limit: -1}, benchJobs},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				list, err := c.ListJobs(ctx, bc.o)
				if err != nil {
					b.Fatal(err)
				}
				if list.Matched < bc.wanted || (list.Complete && list.Matched != bc.wanted) {
					b.Fatalf("matched %d jobs, want %d", list.Matched, bc.wanted)
				}
			}
		})
	}
}

// fill writes benchJobs state records and their events, asynchronously.
func fill(b *testing.B, n *testenv.NATS) {
	b.Helper()
	now := time.Now().UTC()
	pub := func(m *nats.Msg) {
		if _, err := n.JS.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	for i := range benchJobs {
		id := fmt.Sprintf("bench-%06d", i)
		status := state.StatusSucceeded
		if i%100 == 0 {
			status = state.StatusFailed
		}
		rec := &state.Record{JobID: id, Kind: "video", Status: status, Attempts: 1, CreatedAt: now, UpdatedAt: now,
			Labels: map[string]string{"bench": "list"}, Upstream: state.Upstream{TaskID: "t-" + id}}
		if status == state.StatusFailed {
			rec.Error = &state.Error{Code: "blocked", Message: "simulated", Stage: state.StagePoll}
		}
		body, _ := json.Marshal(rec)
		m := nats.NewMsg("$KV." + contract.StateBucket + "." + id)
		m.Data = body
		pub(m)
		for _, s := range []state.Status{state.StatusSubmitted, status} {
			ev, _ := json.Marshal(events.FromRecord(rec, s, now))
			m := nats.NewMsg(contract.EventSubject("video", string(s)))
			m.Data = ev
			m.Header.Set(contract.HeaderMsgID, contract.EventID(id, string(s)))
			pub(m)
		}
		if i%1000 == 0 {
			<-n.JS.PublishAsyncComplete()
		}
	}
	<-n.JS.PublishAsyncComplete()
}
