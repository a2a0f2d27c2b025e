package jobclient

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// ListStatuses are the statuses ListJobs filters on: those of the
// contract's events, in order.
var ListStatuses = []string{"submitted", "running", "succeeded", "failed", "cancelled"}

// ListOptions selects the jobs of ListJobs. A job is selected by its
// latest event.
type ListOptions struct {
	// Status is one of ListStatuses. Defaults to every status.
	Status string
	// Kind limits the jobs to one kind. Defaults to every kind.
	Kind jobspec.Kind
	// Labels the jobs must carry, each with the given value.
	Labels map[string]string
	// Since selects the jobs active in this past period. Defaults to 24h;
	// events are kept for SLUICE_EVENTS_MAX_AGE (7 days by default).
	Since time.Duration
	// Limit bounds the jobs returned, newest first. Defaults to 50;
	// negative means no limit.
	Limit int
	// IDContains keeps the jobs whose id contains it. Defaults to all.
	IDContains string
	// Tenant keeps the jobs of this tenant ("default" for the jobs
	// without one). Defaults to every tenant.
	Tenant string
	// Stuck lists, instead of the jobs active in Since, those a worker's
	// watchdog found stuck at the step they are still at (ListStuck).
	Stuck bool
}

func (o ListOptions) withDefaults() ListOptions {
	o.Since = cmp.Or(o.Since, 24*time.Hour)
	o.Limit = cmp.Or(o.Limit, 50)
	return o
}

func (o ListOptions) validate() error {
	if o.Status != "" && !slices.Contains(ListStatuses, o.Status) {
		return fmt.Errorf("status: want one of %s, got %q", strings.Join(ListStatuses, ", "), o.Status)
	}
	if o.Kind != "" && !o.Kind.Valid() {
		return fmt.Errorf("kind: want %s, got %q", strings.Join(contract.Kinds, ", "), o.Kind)
	}
	if o.Since < 0 {
		return fmt.Errorf("since must not be negative, got %s", o.Since)
	}
	return nil
}

// JobList is the answer of ListJobs.
type JobList struct {
	// Jobs are the selected jobs, newest activity first, at most Limit.
	Jobs []Job `json:"jobs"`
	// Matched counts the selected jobs, Limit or not: all of them when
	// Complete, else those among the newest events read.
	Matched int `json:"matched"`
	// Complete reports that every event of the period was read. On a
	// busy stream without a selective filter only the newest events are
	// read, enough to fill Limit.
	Complete bool `json:"complete"`
	// Since is the start of the period looked at.
	Since time.Time `json:"since"`
}

// ListJobs lists jobs by their latest event in SLUICE_EVENTS. It reads only
// the events the filters select, the server filtering them by subject
// (sluice.events.<kind>.<status>) and start time, so that listing the
// failed jobs of the last hour reads those failed events and nothing else:
// never every record of SLUICE_STATE. A job with no event yet (queued, or
// received and not yet submitted) is listed only with Tenant and no
// Status, from that tenant's class queues (addTenantWaiting): Overview
// counts the others, and Status finds one by id.
func (c *Client) ListJobs(ctx context.Context, o ListOptions) (*JobList, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if o.Stuck {
		return c.listStuck(ctx, o)
	}
	start := c.now().Add(-o.Since)
	q := query{stream: contract.EventsStream, subjects: eventSubjects(o.Kind, o.Status), start: start}
	cons, err := c.consumer(ctx, q)
	if err != nil {
		return nil, err
	}
	defer c.dropConsumer(q, cons)
	jobs := make(map[string]*Job)
	complete := o.Limit < 0 || cons.CachedInfo().NumPending <= fullScanMax
	if complete {
		err = c.read(ctx, q, cons, func(m jetstream.Msg) bool {
			foldEvent(jobs, m)
			return true
		})
	} else {
		jobs, complete, err = c.newestJobs(ctx, q, o)
	}
	if err != nil {
		return nil, err
	}
	// A tenant's jobs without an event yet, waiting for budget among them.
	if o.Tenant != "" && o.Status == "" {
		if err := c.addTenantWaiting(ctx, jobs, o); err != nil {
			return nil, err
		}
	}
	var out []Job
	for _, j := range jobs {
		if o.matches(j) {
			out = append(out, *j)
		}
	}
	slices.SortFunc(out, func(a, b Job) int {
		if c := cmpTime(b.UpdatedAt, a.UpdatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	res := &JobList{Matched: len(out), Complete: complete, Since: start.UTC()}
	if o.Limit > 0 && len(out) > o.Limit {
		out = out[:o.Limit]
	}
	res.Jobs = out
	if res.Jobs == nil {
		res.Jobs = []Job{}
	}
	return res, nil
}

// fullScanMax is the most selected events ListJobs reads in full; past
// it, it reads only the newest (newestJobs).
const fullScanMax = 20_000

// newestJobs reads the newest events q selects, from a stream sequence
// that moves back (8, 32, 128... times Limit events) until the page is
// full or the period is covered. Reading newest first is exact for a
// newest-first page: a job's first event met is its latest.
func (c *Client) newestJobs(ctx context.Context, q query, o ListOptions) (map[string]*Job, bool, error) {
	s, err := c.js.Stream(ctx, q.stream)
	if err != nil {
		return nil, false, c.jsErr(err)
	}
	last := s.CachedInfo().State.LastSeq
	for back := uint64(o.Limit) * 8; ; back *= 4 {
		jobs := make(map[string]*Job)
		from := uint64(1)
		if back < last {
			from = last - back + 1
		}
		covered := from == 1
		tq := q
		tq.startSeq = from
		err := c.scan(ctx, tq, func(m jetstream.Msg) bool {
			if meta, err := m.Metadata(); err == nil && meta.Timestamp.Before(q.start) {
				covered = true // the period starts inside this tail
				return true
			}
			foldEvent(jobs, m)
			return true
		})
		if err != nil {
			return nil, false, err
		}
		n := 0
		for _, j := range jobs {
			if o.matches(j) {
				n++
			}
		}
		if covered || n >= o.Limit {
			return jobs, covered, nil
		}
	}
}

func (o ListOptions) matches(j *Job) bool {
	if o.Status != "" && j.Status != o.Status {
		return false
	}
	if o.IDContains != "" && !strings.Contains(j.ID, o.IDContains) {
		return false
	}
	if o.Tenant != "" && cmp.Or(j.Tenant, jobspec.DefaultTenant) != o.Tenant {
		return false
	}
	for k, v := range o.Labels {
		if got, ok := j.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// eventSubjects are the subjects that decide whether a job's latest
// status is status: that status and every later one.
// Every subject is spelled out: the server finds sparse literal subjects
// much faster than a wildcard (sluice.events.*.failed).
func eventSubjects(kind jobspec.Kind, status string) []string {
	kinds := contract.Kinds
	if kind != "" {
		kinds = []string{string(kind)}
	}
	var subs []string
	for _, k := range kinds {
		for _, s := range ListStatuses {
			if status == "" || s == status || (rank(s) > rank(status) && !state.Status(status).Terminal()) {
				subs = append(subs, contract.EventSubject(k, s))
			}
		}
	}
	return subs
}

// foldEvent records m's event in jobs unless the job's known status is
// later.
func foldEvent(jobs map[string]*Job, m jetstream.Msg) {
	var ev events.Event
	if json.Unmarshal(m.Data(), &ev) != nil || ev.Data.JobID == "" {
		return
	}
	j := JobFromEvent(&ev)
	j.Worker = m.Headers().Get(contract.HeaderWorker)
	if prev, ok := jobs[j.ID]; ok && rank(prev.Status) > rank(j.Status) {
		return
	}
	jobs[j.ID] = &j
}

func cmpTime(a, b *time.Time) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return a.Compare(*b)
}
