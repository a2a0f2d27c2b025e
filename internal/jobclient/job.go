package jobclient

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/state"
)

// StatusQueued is the status of a job no worker has reported on yet.
const StatusQueued = "queued"

// Job is what a producer may see of a job: its state record or its latest
// event, without the record's results (which may be signed URLs) and with
// every artifact URL passed through redact.URL.
type Job struct {
	// ID is the job id.
	ID string `json:"job_id"`
	// Kind is video, speech, compute, container or pipeline; empty while
	// unknown.
	Kind string `json:"kind,omitempty"`
	// Status is queued (no worker has reported on it), one of the state
	// record's steps (received, submitting, submitted, running,
	// collecting) or a terminal status (succeeded, failed, cancelled).
	Status string `json:"status"`
	// Labels are the spec's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Tenant and Priority are the spec's, or their defaults; empty and 0
	// while unknown (docs/tenants.md).
	Tenant   string `json:"tenant,omitempty"`
	Priority int    `json:"priority,omitempty"`
	// Cost is the job's cost in credits, once it ended under a price
	// table that covers it.
	Cost *float64 `json:"cost,omitempty"`
	// Attempts counts the deliveries that reached a worker.
	Attempts int `json:"attempts"`
	// CancelRequested reports that a cancel was requested.
	CancelRequested bool `json:"cancel_requested"`
	// Upstream holds the upstream ids and status; nil before submission.
	Upstream *state.Upstream `json:"upstream,omitempty"`
	// Artifacts are the objects copied to S3 so far.
	Artifacts []state.Artifact `json:"artifacts"`
	// Steps are a pipeline's steps with their statuses, jobs and
	// artifacts (docs/pipelines.md); absent for the other kinds.
	Steps []state.PipelineStep `json:"steps,omitempty"`
	// Usage is upstream's usage object, verbatim.
	Usage json.RawMessage `json:"usage,omitempty"`
	// Error is set on a failed job.
	Error *state.Error `json:"error,omitempty"`
	// LastError is the last error of the step a job retries (not failed):
	// why it stays at its status. Only a state record carries it.
	LastError *state.StepError `json:"last_error,omitempty"`
	// WaitingFor is "budget" while the job waits for its tenant's budget
	// (docs/tenants.md#budgets): before any worker takes it, the tenant's
	// budget reached, or in a worker, its estimate beyond what is left.
	// Nothing is submitted meanwhile.
	WaitingFor string `json:"waiting_for,omitempty"`
	// Worker names the worker that last wrote the record.
	Worker string `json:"worker,omitempty"`
	// Stuck is set while the job is at the step a worker's watchdog found
	// it stuck in (state.Record.StuckNow). Only a state record carries it.
	Stuck *state.StuckMark `json:"stuck,omitempty"`
	// CreatedAt, UpdatedAt, SubmittedAt and FinishedAt come from the state
	// record (UpdatedAt from the event's time when the job was seen
	// through an event).
	CreatedAt   *time.Time `json:"created_at,omitempty"`
	UpdatedAt   *time.Time `json:"updated_at,omitempty"`
	SubmittedAt *time.Time `json:"submitted_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`

	// fromEvent: the Job was made from an event, which carries no last
	// error.
	fromEvent bool
}

// WaitingForBudget is Job.WaitingFor of a job waiting for its tenant's
// budget.
const WaitingForBudget = "budget"

// codeBudgetExhausted is the error code of a wait for budget in a record's
// last error (and of a job failed for budget).
const codeBudgetExhausted = "budget_exhausted"

// Terminal reports whether the job has ended: succeeded, failed or
// cancelled.
func (j *Job) Terminal() bool { return state.Status(j.Status).Terminal() }

// JobFromRecord returns the Job of a state record. A record without a
// status exists only because a cancel was requested: its job is queued.
func JobFromRecord(r *state.Record) Job {
	j := Job{
		ID:              r.JobID,
		Kind:            r.Kind,
		Status:          string(r.Status),
		Labels:          r.Labels,
		Tenant:          r.Tenant,
		Priority:        r.Priority,
		Cost:            r.Cost,
		Attempts:        r.Attempts,
		CancelRequested: r.Cancel != nil,
		Artifacts:       scrubArtifacts(r.Artifacts),
		Usage:           nullToNil(r.Usage),
		Error:           r.Error,
		LastError:       scrubStepError(r.LastError),
		Worker:          r.Worker,
		SubmittedAt:     r.SubmittedAt,
		FinishedAt:      r.FinishedAt,
	}
	if r.Pipeline != nil {
		j.Steps = scrubSteps(r.Pipeline.Steps)
	}
	if j.Status == "" {
		j.Status = StatusQueued
	}
	if r.StuckNow() {
		j.Stuck = r.Stuck
	}
	if !r.Status.Terminal() && r.LastError != nil && r.LastError.Code == codeBudgetExhausted {
		j.WaitingFor = WaitingForBudget
	}
	if r.Upstream != (state.Upstream{}) {
		u := r.Upstream
		j.Upstream = &u
	}
	if !r.CreatedAt.IsZero() {
		t := r.CreatedAt
		j.CreatedAt = &t
	}
	if !r.UpdatedAt.IsZero() {
		t := r.UpdatedAt
		j.UpdatedAt = &t
	}
	return j
}

// JobFromEvent returns the Job an event describes.
func JobFromEvent(ev *events.Event) Job {
	d := ev.Data
	j := Job{
		ID:        d.JobID,
		Kind:      d.Kind,
		Status:    d.Status,
		Labels:    d.Labels,
		Tenant:    d.Tenant,
		Priority:  d.Priority,
		Cost:      d.Cost,
		Attempts:  d.Attempt,
		Upstream:  d.Upstream,
		Artifacts: scrubArtifacts(d.Artifacts),
		Usage:     nullToNil(d.Usage),
		Error:     d.Error,
		Steps:     scrubSteps(d.Steps),
		fromEvent: true,
	}
	if j.ID == "" {
		j.ID = ev.Subject
	}
	if t, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
		j.UpdatedAt = &t
	}
	return j
}

func scrubArtifacts(in []state.Artifact) []state.Artifact {
	out := make([]state.Artifact, len(in))
	for i, a := range in {
		a.URL = redact.URL(a.URL)
		a.Source = redact.URL(a.Source)
		out[i] = a
	}
	return out
}

// scrubSteps returns steps with their artifacts scrubbed as a job's are.
func scrubSteps(in []state.PipelineStep) []state.PipelineStep {
	if in == nil {
		return nil
	}
	out := make([]state.PipelineStep, len(in))
	for i, s := range in {
		s.Artifacts = scrubArtifacts(s.Artifacts)
		out[i] = s
	}
	return out
}

func nullToNil(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// ShortDuration is how the CLI and the console say an age or a period:
// 42s, 5m, 3h (up to two days) or 2d. A negative d is 0s.
func ShortDuration(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// scrubStepError returns a copy of e with its message passed through
// redact.Text (a record written by any worker is shown); nil stays nil.
func scrubStepError(e *state.StepError) *state.StepError {
	if e == nil {
		return nil
	}
	c := *e
	c.Message = redact.Text(c.Message)
	return &c
}
