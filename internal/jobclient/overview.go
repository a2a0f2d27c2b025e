package jobclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
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
		cons, err := c.js.Consumer(ctx, contract.JobsStream, contract.ConsumerName(k))
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, c.jsErr(fmt.Errorf("consumer %s: %w", contract.ConsumerName(k), err))
		}
		info := cons.CachedInfo()
		ov.InFlight[k] = InFlight{Waiting: info.NumPending, Held: info.NumAckPending}
	}
	s, err := c.js.Stream(ctx, contract.DLQStream)
	if err == nil {
		ov.DeadLetters = s.CachedInfo().State.Msgs
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, c.jsErr(err)
	}
	return ov, nil
}
