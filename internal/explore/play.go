package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobclient"
)

// jobID is the id of a schedule's i-th job.
func jobID(i int) string { return fmt.Sprintf("exp-job-%d", i) }

// prompt names a job's family in what it pays for, so the simulator's
// records say which job created each task.
func prompt(family string) string { return "explore " + family + " ." }

// roleIn is the job a request or subject is about: the job whose id it
// names (the longest such id: a retry's id extends its original's), else
// the family of the upstream object it names; "-" when none.
func (r *run) roleIn(text string) string {
	r.mu.Lock()
	jobs := append([]job(nil), r.jobs...)
	r.mu.Unlock()
	sort.Slice(jobs, func(i, j int) bool { return len(jobs[i].id) > len(jobs[j].id) })
	for _, j := range jobs {
		if strings.Contains(text, j.id) {
			return roleName(j.id)
		}
	}
	for _, rec := range append(r.media.Records(), r.compute.Records()...) {
		if strings.Contains(text, rec.ID) {
			return roleName(familyOf(rec.Owner))
		}
	}
	return "-"
}

// roleName is a job's name in decision points: the same in every
// schedule, so points can be counted across schedules.
func roleName(id string) string { return strings.TrimPrefix(id, "exp-") }

// familyOf is the family a prompt or name was made for.
func familyOf(owner string) string {
	f := strings.Fields(owner)
	if len(f) >= 2 && f[0] == "explore" {
		return f[1]
	}
	return owner
}

// publish sends job i's spec; again publishes it a second time without
// the message id, so JetStream delivers the same job id twice.
func (r *run) publish(ctx context.Context, id string, dedup bool) error {
	spec := map[string]any{
		"id": id, "kind": "video",
		"video": map[string]any{
			"model": "video-model", "input": map[string]any{"prompt": prompt(id)},
			"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
		},
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	m := nats.NewMsg(contract.JobSubject("video"))
	m.Data = data
	if dedup {
		m.Header.Set(contract.HeaderMsgID, id)
	}
	_, err = r.nats.JS.PublishMsg(ctx, m)
	return err
}

// play runs the schedule's producers: it publishes the jobs, a duplicate,
// a cancel and a retry as the seed says, and waits for every job's
// terminal event.
func (r *run) play(ctx context.Context) ([]events.Event, error) {
	nc := r.nats.Conn
	if err := contract.EnsureJobsStream(ctx, r.nats.JS, contract.Options{}); err != nil {
		return nil, err
	}
	r.startWorker()
	for i := 1; i <= jobsPerRun; i++ {
		r.addJob(job{id: jobID(i), family: jobID(i)})
		if err := r.publish(ctx, jobID(i), true); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
	}
	if hash(r.seed, "duplicate")%2 == 0 {
		if err := r.publish(ctx, jobID(1), false); err != nil {
			return nil, fmt.Errorf("publish again: %w", err)
		}
	}
	jc, err := jobclient.New(nc, time.Now)
	if err != nil {
		return nil, err
	}
	if hash(r.seed, "cancel")%2 == 0 {
		// The answer does not matter: the job's events say what happened.
		_, _ = jc.Cancel(ctx, jobID(2), jobclient.CancelOptions{})
	}
	evs, err := r.awaitTerminal(ctx)
	if err != nil || !r.allEnded(evs) || hash(r.seed, "retry")%2 != 0 {
		return evs, err
	}
	res, err := jc.Retry(ctx, jobID(3), jobclient.RetryOptions{Force: true})
	if err != nil {
		return evs, nil // a job retry refuses (e.g. still held) is no violation
	}
	r.addJob(job{id: res.RetryID, family: jobID(3)})
	return r.awaitTerminal(ctx)
}

func (r *run) addJob(j job) {
	r.mu.Lock()
	r.jobs = append(r.jobs, j)
	r.mu.Unlock()
}

// awaitTerminal reads the events until every job has a terminal one, or
// settleBound passed (the checks then report the jobs without one).
func (r *run) awaitTerminal(ctx context.Context) ([]events.Event, error) {
	deadline := time.Now().Add(settleBound)
	for {
		evs, err := r.events(ctx)
		if err != nil {
			return nil, err
		}
		if r.allEnded(evs) || time.Now().After(deadline) {
			return evs, nil
		}
		select {
		case <-ctx.Done():
			return evs, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *run) allEnded(evs []events.Event) bool {
	ended := map[string]bool{}
	for _, e := range evs {
		if terminal(e.Data.Status) {
			ended[e.Data.JobID] = true
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		if !ended[j.id] {
			return false
		}
	}
	return true
}

func terminal(status string) bool {
	return status == "succeeded" || status == "failed" || status == "cancelled"
}

// events is every event published so far, in order.
func (r *run) events(ctx context.Context) ([]events.Event, error) {
	s, err := r.nats.JS.Stream(ctx, contract.EventsStream)
	if err != nil {
		return nil, nil // no event yet: the stream is made by the first worker
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []events.Event
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		var ev events.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
		out = append(out, ev)
	}
	return out, nil
}
