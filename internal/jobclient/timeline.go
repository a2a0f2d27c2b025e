package jobclient

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/state"
)

// TimelineEvent is one event of a job as its timeline shows it.
type TimelineEvent struct {
	// Time is the event's time.
	Time time.Time `json:"time"`
	// Status is the event's status.
	Status string `json:"status"`
	// Attempt is the delivery that published it.
	Attempt int `json:"attempt"`
	// Worker names the worker that published it, when it said.
	Worker string `json:"worker,omitempty"`
	// Upstream, Usage and Error are the event's.
	Upstream *state.Upstream `json:"upstream,omitempty"`
	Usage    json.RawMessage `json:"usage,omitempty"`
	Error    *state.Error    `json:"error,omitempty"`
	// Artifacts are the event's, URLs scrubbed.
	Artifacts []state.Artifact `json:"artifacts,omitempty"`
}

// Timeline returns the events of job id, oldest first. It reads the
// job's record for its kind and the time it was received, then the
// events of that kind from then on (less SkewAllowance) until the job's
// terminal event: a job's timeline costs the events published while it
// ran, not the whole stream. It returns an error wrapping ErrNoSuchJob
// when the job has no record.
func (c *Client) Timeline(ctx context.Context, id string) ([]TimelineEvent, error) {
	rec, err := c.record(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec.Kind == "" {
		return []TimelineEvent{}, nil // only a cancel flag: no worker has seen it
	}
	return c.timeline(ctx, rec)
}

func (c *Client) timeline(ctx context.Context, rec *state.Record) ([]TimelineEvent, error) {
	out := []TimelineEvent{}
	prefix := rec.JobID + "."
	q := query{stream: contract.EventsStream, subjects: []string{contract.EventsSubjectPrefix + rec.Kind + ".>"}, start: rec.CreatedAt.Add(-SkewAllowance)}
	err := c.scan(ctx, q, func(m jetstream.Msg) bool {
		if !strings.HasPrefix(m.Headers().Get(contract.HeaderMsgID), prefix) {
			return true
		}
		var ev events.Event
		if json.Unmarshal(scrubEventJSON(m.Data()), &ev) != nil || ev.Data.JobID != rec.JobID {
			return true
		}
		te := TimelineEvent{
			Status: ev.Data.Status, Attempt: ev.Data.Attempt, Worker: m.Headers().Get(contract.HeaderWorker),
			Upstream: ev.Data.Upstream, Usage: nullToNil(ev.Data.Usage), Error: ev.Data.Error, Artifacts: ev.Data.Artifacts,
		}
		te.Time, _ = time.Parse(time.RFC3339Nano, ev.Time)
		out = append(out, te)
		return !state.Status(te.Status).Terminal()
	})
	return out, err
}
