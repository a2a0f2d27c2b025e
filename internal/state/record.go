// Package state keeps each job's checkpoint in the SLUICE_STATE key-value
// bucket: one JSON record per job id, written with compare-and-set at every
// step so that a redelivered job resumes where the last worker stopped
// instead of paying upstream twice.
package state

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// Status is a job's step as recorded in its state record.
type Status string

// The steps of a job, in order. A record whose Status is empty exists only
// because a cancel was requested before any worker received the job.
const (
	StatusReceived   Status = "received"
	StatusSubmitting Status = "submitting"
	StatusSubmitted  Status = "submitted"
	StatusRunning    Status = "running"
	StatusCollecting Status = "collecting"
	StatusSucceeded  Status = "succeeded"
	StatusFailed     Status = "failed"
	StatusCancelled  Status = "cancelled"
)

// Terminal reports whether s is succeeded, failed or cancelled.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// Record is a job's state record, the value stored under its id.
type Record struct {
	JobID  string            `json:"job_id"`
	Kind   string            `json:"kind,omitempty"`
	Status Status            `json:"status,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Tenant and Priority are the spec's (docs/tenants.md); empty and 0
	// on a record written before its spec was read.
	Tenant   string `json:"tenant,omitempty"`
	Priority int    `json:"priority,omitempty"`
	// Reservation is the job's open budget reservation, taken before its
	// paid submit: a redelivered job settles this one.
	Reservation *Reservation `json:"reservation,omitempty"`
	// Cost is the job's actual cost in credits, set on the terminal
	// record when the price table covers the job.
	Cost *float64 `json:"cost,omitempty"`
	// Attempts counts the deliveries of the job that reached a worker.
	Attempts int `json:"attempts"`
	// Submits counts the submissions sent upstream. It is above 1 only when
	// a worker died between sending a submit and recording its result.
	Submits int `json:"submits,omitempty"`
	// Cancel is set when a cancel was requested.
	Cancel *CancelRequest `json:"cancel,omitempty"`
	// Upstream holds the upstream ids and last seen status.
	Upstream Upstream `json:"upstream"`
	// Results are result addresses that cannot be fetched again from
	// upstream (synchronous speech). They may carry signed query strings:
	// never show them unscrubbed.
	Results []string `json:"results,omitempty"`
	// Artifacts are the objects already copied to S3.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Pipeline is a pipeline's steps (docs/pipelines.md); nil for the
	// other kinds.
	Pipeline *Pipeline `json:"pipeline,omitempty"`
	// Usage is upstream's usage object, verbatim.
	Usage json.RawMessage `json:"usage,omitempty"`
	// Error is set on a failed job.
	Error *Error `json:"error,omitempty"`
	// LastError is the last error of a step that is being retried (the
	// job is not failed): why a job stays at its step. It is cleared when
	// the job moves to another step, and on the terminal record.
	LastError *StepError `json:"last_error,omitempty"`
	// Stuck is set by the worker's watchdog when the job stayed in one
	// step far longer than the step's bound (internal/watchdog). It
	// counts while the record is still at that step (StuckNow).
	Stuck *StuckMark `json:"stuck,omitempty"`
	// QuotaWaits counts the deliveries that ended because upstream
	// answered the submit with an exhausted quota (nothing was created);
	// they do not count against SLUICE_MAX_DELIVER.
	QuotaWaits int `json:"quota_waits,omitempty"`
	// QuotaSince is when upstream first answered the job's submit with an
	// exhausted quota: the wait SLUICE_MEDIA_QUOTA_WAIT bounds counts from
	// it, whatever other errors come between.
	QuotaSince time.Time `json:"quota_since,omitzero"`
	// ConflictWaits counts the deliveries that ended because upstream
	// answered the submit with a concurrency conflict (too many tasks at
	// once; nothing was created); they do not count against
	// SLUICE_MAX_DELIVER, nor against SLUICE_MEDIA_QUOTA_WAIT.
	ConflictWaits int `json:"conflict_waits,omitempty"`
	// Note qualifies a terminal status, e.g. "submit_may_have_happened"
	// on a job cancelled inside its submit window (docs/events.md).
	Note string `json:"note,omitempty"`
	// BudgetWaits counts the deliveries that ended because the job's
	// tenant had spent its budget (nothing was submitted); they do not
	// count against SLUICE_MAX_DELIVER either.
	BudgetWaits int `json:"budget_waits,omitempty"`
	// DeadLetter is set on a failed job whose message goes to SLUICE_DLQ.
	DeadLetter bool `json:"dead_letter,omitempty"`
	// Worker names the worker that last wrote the record.
	Worker string `json:"worker,omitempty"`
	// WriteID names the write that stored this version of the record. A
	// writer whose compare-and-set went unanswered (a connection or a
	// stream leader lost on the way) reads the record again and knows
	// its own write by it, instead of writing the change a second time.
	WriteID string `json:"write_id,omitempty"`
	// TerminalEvent is the exact terminal event published, kept so that a
	// redelivered finished job republishes the same bytes.
	TerminalEvent json.RawMessage `json:"terminal_event,omitempty"`
	// TerminalSeq is the SLUICE_JOBS sequence of the message whose
	// delivery wrote the terminal record. That delivery publishes
	// TerminalEvent and then acknowledges its message, waiting for the
	// server to confirm the ack (which removes the message for good); only
	// that message, delivered again, publishes the event again (its
	// delivery may have stopped before the publish). A copy of the spec
	// published again under another sequence publishes nothing.
	TerminalSeq uint64 `json:"terminal_seq,omitempty"`
	// TerminalEventStored is set once SLUICE_EVENTS acknowledged
	// TerminalEvent, when the message that ended the job may still be
	// delivered again: its ack was not confirmed, it is dead-lettered, or
	// the record has no TerminalSeq (written by an older worker). From
	// then on the event is not published again (a core subscriber would
	// see it twice). Until then a redelivered finished job publishes it,
	// so an event lost between its publish and this record is still
	// published once.
	TerminalEventStored bool `json:"terminal_event_stored,omitempty"`

	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	SubmittedAt *time.Time `json:"submitted_at,omitempty"`
	// PreflightAt is when every media input passed the preflight checks;
	// a redelivered job does not probe them again.
	PreflightAt *time.Time `json:"preflight_at,omitempty"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`

	// revision is the bucket revision this record was read or written at
	// (0 when it did not come from the bucket); see Store.UpdateFrom.
	revision uint64
}

// Stored reports whether r was read from or written to the bucket (not
// made up by its caller, such as a job's first record before its first
// write).
func (r *Record) Stored() bool { return r.revision != 0 }

// clone returns a copy of r that shares nothing mutable with it.
func (r *Record) clone() *Record {
	c := *r
	c.Labels = maps.Clone(r.Labels)
	c.Results = slices.Clone(r.Results)
	c.Artifacts = slices.Clone(r.Artifacts)
	c.Pipeline = r.Pipeline.clone()
	c.Usage = bytes.Clone(r.Usage)
	c.TerminalEvent = bytes.Clone(r.TerminalEvent)
	c.Cancel = clonePtr(r.Cancel)
	c.Error = clonePtr(r.Error)
	c.LastError = clonePtr(r.LastError)
	c.Stuck = clonePtr(r.Stuck)
	c.SubmittedAt = clonePtr(r.SubmittedAt)
	c.PreflightAt = clonePtr(r.PreflightAt)
	c.FinishedAt = clonePtr(r.FinishedAt)
	c.Reservation = clonePtr(r.Reservation)
	c.Cost = clonePtr(r.Cost)
	c.Upstream.ExitCode = clonePtr(r.Upstream.ExitCode)
	return &c
}

// StuckMark is where and since when a job was found stuck.
type StuckMark struct {
	// Step is the step the job stayed in (a Status), Since when it
	// entered it, At when the watchdog found it past the step's bound.
	Step  Status    `json:"step"`
	Since time.Time `json:"since"`
	At    time.Time `json:"at"`
	// Worker is the worker whose watchdog found it.
	Worker string `json:"worker,omitempty"`
}

// StuckNow reports whether r is a job found stuck at the step it is still
// at: a job that moved on or ended since is not.
func (r *Record) StuckNow() bool {
	return r.Stuck != nil && !r.Status.Terminal() && r.Stuck.Step == r.Status
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Reservation is a budget reservation in the ledger (docs/tenants.md).
type Reservation struct {
	// Key is the ledger day key holding it.
	Key string `json:"key"`
	// Credits is the estimate reserved.
	Credits float64 `json:"credits"`
}

// CancelRequest records a cancel request.
type CancelRequest struct {
	RequestedAt time.Time `json:"requested_at"`
}

// Upstream is what sluice knows of the upstream task or job. Media tasks use
// the first five fields, compute jobs the next five (Status too), container
// jobs ClusterID, InstanceID, Status (the instance's) and ExitCode (the
// script's).
type Upstream struct {
	TaskID     string `json:"task_id,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	Status     string `json:"status,omitempty"`
	SubmitTime string `json:"submit_time,omitempty"`
	EndTime    string `json:"end_time,omitempty"`

	ClusterID string `json:"cluster_id,omitempty"`
	JobID     string `json:"job_id,omitempty"`
	// JobName is the platform job name (GAP_JOB_NAME) a compute job's
	// submits are sent under, recorded with the claim: a lost answer's job
	// is looked for by it. Records written before it existed hold none.
	JobName  string  `json:"job_name,omitempty"`
	State    string  `json:"state,omitempty"`
	ExitCode *string `json:"exit_code,omitempty"`

	InstanceID string `json:"instance_id,omitempty"`
}

// Artifact describes one object copied to S3; it is the artifact object of
// the events (docs/events.md).
type Artifact struct {
	// URL is s3://<bucket>/<key>.
	URL string `json:"url"`
	// Bucket holds the object.
	Bucket string `json:"bucket"`
	// Key is the object key.
	Key string `json:"key"`
	// Size is the object's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the lower-case hex SHA-256 of the object's bytes, also
	// stored in the object's user metadata "sha256".
	SHA256 string `json:"sha256"`
	// ContentType is the object's Content-Type.
	ContentType string `json:"content_type"`
	// Source says where the bytes came from; URLs in it are scrubbed of
	// userinfo and query strings.
	Source string `json:"source,omitempty"`
}

// Stage names where a job failed (docs/events.md#error-codes).
type Stage string

// The stages of the contract.
const (
	StageValidate Stage = "validate"
	StageSubmit   Stage = "submit"
	StagePoll     Stage = "poll"
	StageCollect  Stage = "collect"
	StagePublish  Stage = "publish"
)

// Error is a failed job's error (docs/events.md#error-codes).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Stage   Stage  `json:"stage"`
}

// StepError is the last error of a step being retried (Record.LastError).
type StepError struct {
	// Step is the status whose step failed: the job retries it.
	Step Status `json:"step"`
	// Code is sluice's code for the cause when it has one (such as
	// upstream_quota_exhausted), else empty.
	Code string `json:"code,omitempty"`
	// Message is the error, scrubbed of secrets.
	Message string `json:"message"`
	// Since is when the step first failed with this code.
	Since time.Time `json:"since"`
	// At is when Message was recorded.
	At time.Time `json:"at"`
}

// Same reports whether e already says what o says (step, code and
// message): a retry that fails the same way writes nothing.
func (e *StepError) Same(o *StepError) bool {
	return e != nil && o != nil && e.Step == o.Step && e.Code == o.Code && e.Message == o.Message
}
