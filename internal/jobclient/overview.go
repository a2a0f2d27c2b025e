package jobclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/quota"
)

// WindowCounts counts the events of a past period by kind and status.
// Every job has at most one event per status, so the terminal counts are
// the jobs that ended in the period.
type WindowCounts struct {
	// Window is the period's length.
	Window time.Duration `json:"window"`
	// Counts maps kind, then status, to a number of jobs.
	Counts map[string]map[string]uint64 `json:"counts"`
}

// InFlight counts the messages of one kind in SLUICE_JOBS.
type InFlight struct {
	// Waiting are not yet delivered to any worker.
	Waiting uint64 `json:"waiting"`
	// Held are delivered to a worker and not yet settled: the jobs being
	// worked on now.
	Held int `json:"held"`
}

// Overview is the fleet at a glance.
type Overview struct {
	// Windows holds the counts of each period asked for.
	Windows []WindowCounts `json:"windows"`
	// InFlight maps kind to its jobs in SLUICE_JOBS now.
	InFlight map[string]InFlight `json:"in_flight"`
	// DeadLetters counts the messages in SLUICE_DLQ.
	DeadLetters uint64 `json:"dead_letters"`
	// Quotas are the fleet's upstream quotas in use (none without a
	// fleet limit).
	Quotas []quota.Status `json:"quotas,omitempty"`
}

// Overview counts the jobs of every kind and status over each window
// without reading an event: the server counts the events a consumer
// filtered by subject and start time would deliver. In-flight numbers
// come from the kinds' durable consumers on SLUICE_JOBS.
func (c *Client) Overview(ctx context.Context, windows ...time.Duration) (*Overview, error) {
	ov := &Overview{InFlight: map[string]InFlight{}}
	now := c.now()
	for _, w := range windows {
		wc := WindowCounts{Window: w, Counts: map[string]map[string]uint64{}}
		for _, k := range contract.Kinds {
			wc.Counts[k] = map[string]uint64{}
			for _, s := range ListStatuses {
				n, err := c.count(ctx, query{stream: contract.EventsStream, subjects: []string{contract.EventSubject(k, s)}, start: now.Add(-w), headersOnly: true})
				if err != nil {
					return nil, err
				}
				wc.Counts[k][s] = n
			}
		}
		ov.Windows = append(ov.Windows, wc)
	}
	for _, k := range contract.Kinds {
		f, ok, err := c.inFlight(ctx, k)
		if err != nil {
			return nil, err
		}
		if ok {
			ov.InFlight[k] = f
		}
	}
	s, err := c.js.Stream(ctx, contract.DLQStream)
	if err == nil {
		ov.DeadLetters = s.CachedInfo().State.Msgs
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, c.jsErr(err)
	}
	// The quotas are a line of the overview, not its point: a client that
	// may not read SLUICE_QUOTA still gets the rest (enqueue quota says
	// why).
	ov.Quotas, _ = c.Quotas(ctx)
	return ov, nil
}

// Quotas returns the fleet's upstream quotas as the SLUICE_QUOTA bucket
// holds them: per limited resource (media, compute), the leases in use
// across the fleet against the limit, the jobs waiting for one, and the
// requests of the current second against the rate. None when no worker
// has a fleet limit.
func (c *Client) Quotas(ctx context.Context) ([]quota.Status, error) {
	sts, err := quota.Read(ctx, c.js, c.now())
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("bucket %s: %w", quota.Bucket, err))
	}
	for i := range sts {
		for _, k := range contract.Kinds {
			if quota.ResourceOf(k) != sts[i].Resource {
				continue
			}
			f, _, err := c.inFlight(ctx, k)
			if err != nil {
				return nil, err
			}
			sts[i].Queued += f.Waiting
		}
	}
	return sts, nil
}

// inFlight counts kind's messages in SLUICE_JOBS from its durable
// consumer; ok is false when the consumer does not exist yet.
func (c *Client) inFlight(ctx context.Context, kind string) (f InFlight, ok bool, err error) {
	cons, err := c.js.Consumer(ctx, contract.JobsStream, contract.ConsumerName(kind))
	if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return f, false, nil
	}
	if err != nil {
		return f, false, c.jsErr(fmt.Errorf("consumer %s: %w", contract.ConsumerName(kind), err))
	}
	info := cons.CachedInfo()
	return InFlight{Waiting: info.NumPending, Held: info.NumAckPending}, true, nil
}
