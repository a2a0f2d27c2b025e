package jobclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/quota"
)

// WindowCounts counts the jobs active in a past period (those with an
// event in it) by kind and current status: a job is counted once, under
// the status of its latest event, so a finished video counts as
// succeeded only.
type WindowCounts struct {
	// Window is the period's length.
	Window time.Duration `json:"window"`
	// Counts maps kind, then status, to a number of jobs.
	Counts map[string]map[string]uint64 `json:"counts"`
	// Exact is false when the period held more than overviewScanMax
	// events: the terminal counts are then still exact (a job has one
	// terminal event), but submitted and running count the events of
	// those steps, not the jobs now at them.
	Exact bool `json:"exact"`
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

// Overview counts the jobs of every kind by current status over each
// window (see WindowCounts), reading the headers of the longest window's
// events once: an event's subject gives its kind and status, its
// Nats-Msg-Id (<job id>.<status>) its job. In-flight numbers come from
// the kinds' durable consumers on SLUICE_JOBS.
func (c *Client) Overview(ctx context.Context, windows ...time.Duration) (*Overview, error) {
	ov := &Overview{InFlight: map[string]InFlight{}}
	counts, err := c.windowCounts(ctx, windows)
	if err != nil {
		return nil, err
	}
	ov.Windows = counts
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
	// The boards' times are the bucket's server's (quota.Clock).
	sts, err := quota.Read(ctx, c.js, time.Time{})
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
	f = InFlight{Waiting: info.NumPending, Held: info.NumAckPending}
	if err := c.classesInFlight(ctx, kind, &f); err != nil {
		return f, false, err
	}
	return f, true, nil
}

// classesInFlight adds to f the messages of kind's class queues (fair
// scheduling, docs/lifecycle.md "Order of starts"), from their consumers:
// one stream info names the queues with messages, one consumer info each
// counts them.
func (c *Client) classesInFlight(ctx context.Context, kind string, f *InFlight) error {
	s, err := c.js.Stream(ctx, contract.JobsStream)
	if err != nil {
		return c.jsErr(fmt.Errorf("stream %s: %w", contract.JobsStream, err))
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contract.ClassesFilter(kind)))
	if err != nil {
		return c.jsErr(fmt.Errorf("stream %s: %w", contract.JobsStream, err))
	}
	for subject := range info.State.Subjects {
		cl, ok := contract.ParseClassSubject(subject)
		if !ok {
			continue
		}
		name := contract.ClassConsumerName(cl.Kind, cl.Priority, cl.Tenant)
		cons, err := s.Consumer(ctx, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			// No worker has served the queue yet: all of it waits.
			f.Waiting += info.State.Subjects[subject]
			continue
		}
		if err != nil {
			return c.jsErr(fmt.Errorf("consumer %s: %w", name, err))
		}
		ci := cons.CachedInfo()
		f.Waiting += ci.NumPending
		f.Held += ci.NumAckPending
	}
	return nil
}

// overviewScanMax is the most events Overview reads; past it, it counts
// the events of each status on the server instead (WindowCounts.Exact).
const overviewScanMax = 50_000

// windowCounts counts the jobs of each window by current status.
func (c *Client) windowCounts(ctx context.Context, windows []time.Duration) ([]WindowCounts, error) {
	now := c.now()
	longest := time.Duration(0)
	for _, w := range windows {
		longest = max(longest, w)
	}
	q := query{stream: contract.EventsStream, subjects: []string{contract.EventsSubjectPrefix + ">"}, start: now.Add(-longest), headersOnly: true}
	cons, err := c.consumer(ctx, q)
	if err != nil {
		return nil, err
	}
	defer c.dropConsumer(q, cons)
	out := make([]WindowCounts, len(windows))
	for i, w := range windows {
		out[i] = WindowCounts{Window: w, Counts: map[string]map[string]uint64{}, Exact: true}
		for _, k := range contract.Kinds {
			out[i].Counts[k] = map[string]uint64{}
		}
	}
	if cons.CachedInfo().NumPending > overviewScanMax {
		return c.stepCounts(ctx, now, out)
	}
	type latest struct {
		kind, status string
		at           time.Time
	}
	jobs := map[string]latest{}
	err = c.read(ctx, q, cons, func(m jetstream.Msg) bool {
		kind, status, ok := strings.Cut(strings.TrimPrefix(m.Subject(), contract.EventsSubjectPrefix), ".")
		id, idStatus, idOK := strings.Cut(m.Headers().Get(contract.HeaderMsgID), ".")
		meta, merr := m.Metadata()
		if !ok || !idOK || idStatus != status || merr != nil {
			return true // not an event of sluice's
		}
		// A job's latest event is its latest status; an event of an
		// earlier step stored later (a republish) does not move it back.
		if prev, seen := jobs[id]; seen && rank(status) < rank(prev.status) {
			return true
		}
		jobs[id] = latest{kind: kind, status: status, at: meta.Timestamp}
		return true
	})
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		for i := range out {
			if byStatus := out[i].Counts[j.kind]; byStatus != nil && !j.at.Before(now.Add(-out[i].Window)) {
				byStatus[j.status]++
			}
		}
	}
	return out, nil
}

// stepCounts fills out with the server's counts of each status's events,
// for a period too busy to read: exact for the terminal statuses.
func (c *Client) stepCounts(ctx context.Context, now time.Time, out []WindowCounts) ([]WindowCounts, error) {
	for i := range out {
		out[i].Exact = false
		for _, k := range contract.Kinds {
			for _, s := range ListStatuses {
				n, err := c.count(ctx, query{stream: contract.EventsStream, subjects: []string{contract.EventSubject(k, s)}, start: now.Add(-out[i].Window), headersOnly: true})
				if err != nil {
					return nil, err
				}
				out[i].Counts[k][s] = n
			}
		}
	}
	return out, nil
}
