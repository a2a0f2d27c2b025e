package apiclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// SubmitJob submits a job built from template templateType/templateName
// (POST .../apptemplates/<type>/<name>/job) and returns the platform's job
// id. An empty req.StrJobManagerID is filled with SchedulerID(ctx).
//
// A submission is paid, so it is repeated only when the platform certainly
// did not act: no connection could be made (the next enabled hpc address
// is tried), HTTP 429 or 503, or a rejected token (once, after a refresh).
// Any other failure after the request may have reached the platform (a
// broken connection, a timeout, another 5xx, an unreadable 2xx answer, a
// success without a job id) returns an error matching ErrAmbiguous: the
// job may exist, and the caller must not submit it again blindly.
//
// Errors: ErrInvalidArgument naming the argument, ErrAmbiguous,
// *EnvelopeError (the platform refused the job; also matching ErrMinGRES
// when its scheduler wants more DCUs or GPUs), network errors (nothing
// was sent).
func (s *ClusterSession) SubmitJob(ctx context.Context, templateType, templateName string, req JobRequest) (jobID string, err error) {
	if err := checkSegment("templateType", templateType); err != nil {
		return "", err
	}
	if err := checkSegment("templateName", templateName); err != nil {
		return "", err
	}
	if len(req.MapAppJobInfo) == 0 {
		return "", invalidArg("req.MapAppJobInfo", "is required")
	}
	if req.StrJobManagerID == "" {
		id, err := s.SchedulerID(ctx)
		if err != nil {
			return "", err
		}
		req.StrJobManagerID = id
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", invalidArg("req.MapAppJobInfo", "holds a value that cannot be sent as JSON")
	}
	rq := &request{
		op: "submit job", method: http.MethodPost, svc: svcHPC, auth: true,
		path:     "/hpc/openapi/v2/apptemplates/" + url.PathEscape(templateType) + "/" + url.PathEscape(templateName) + "/job",
		jsonBody: body,
		class:    classSubmit,
	}
	res, err := s.c.exchange(ctx, s, rq)
	if err != nil {
		return "", submitError(err)
	}
	id, err := lenientString(res.data)
	if err != nil || strings.TrimSpace(id) == "" {
		return "", s.c.ambiguous(rq, fmt.Errorf("%w: success without a job id", ErrMalformedResponse))
	}
	return strings.TrimSpace(id), nil
}

func checkSegment(field, v string) error {
	switch {
	case v == "":
		return invalidArg(field, "is required")
	case strings.ContainsAny(v, "/\\?#\x00") || v == "." || v == "..":
		return invalidArg(field, "must be a single path segment")
	}
	return nil
}

// Job fetches the details of job jobID (GET .../jobs/{job_id}), retried on
// network errors, 429 and 5xx. Only an answer that says the job is not
// there matches ErrJobNotFound (and still unwraps to the *EnvelopeError):
// HTTP 404, no detail, or an error envelope whose message says the job
// does not exist (see EnvelopeError.saysMissing). Any other error
// envelope, such as 10001 (internal error), is returned as it is: the
// platform did not say the job is gone. The real platform drops a job from
// this call shortly after it ends; see HistoryJob. See JobPhaseOf to
// interpret the detail and JobVanished to judge a not-found.
func (s *ClusterSession) Job(ctx context.Context, jobID string) (*JobDetail, error) {
	if jobID == "" {
		return nil, invalidArg("jobID", "is required")
	}
	if strings.ContainsAny(jobID, "/\\?#\x00") {
		return nil, invalidArg("jobID", "must not contain a path separator")
	}
	res, err := s.c.exchange(ctx, s, &request{
		op: "job", method: http.MethodGet, svc: svcHPC, auth: true,
		path: "/hpc/openapi/v2/jobs/" + url.PathEscape(jobID), pathTmpl: "/hpc/openapi/v2/jobs/{job_id}",
		class: classIdempotent,
	})
	if err != nil {
		if env, ok := errors.AsType[*EnvelopeError](err); ok && env.saysMissing() {
			return nil, fmt.Errorf("apiclient: compute job %s: %w: %w", jobID, ErrJobNotFound, err)
		}
		return nil, err
	}
	if len(bytes.TrimSpace(res.data)) == 0 || isNull(res.data) {
		return nil, fmt.Errorf("apiclient: compute job %s: %w: the platform answered no detail", jobID, ErrJobNotFound)
	}
	var d JobDetail
	if err := json.Unmarshal(res.data, &d); err != nil {
		return nil, fmt.Errorf("apiclient: compute job %s: %w: %w", jobID, ErrMalformedResponse, err)
	}
	return &d, nil
}

// JobPhase is the client's reading of a job's scheduler status.
type JobPhase string

// The phases of a compute job. Succeeded, Failed and Cancelled are
// terminal; Unknown means "not recognised, keep polling".
const (
	JobUnknown   JobPhase = "unknown"
	JobQueued    JobPhase = "queued"
	JobRunning   JobPhase = "running"
	JobSucceeded JobPhase = "succeeded"
	JobFailed    JobPhase = "failed"
	JobCancelled JobPhase = "cancelled"
)

// Terminal reports whether p is Succeeded, Failed or Cancelled.
func (p JobPhase) Terminal() bool { return p == JobSucceeded || p == JobFailed || p == JobCancelled }

// statusClass is how JobPhaseOf reads one status value.
type statusClass int

// The classes in rising strength: when jobStatus and JobState read
// differently, the stronger one wins.
const (
	stUnknown   statusClass = iota
	stQueued                // waiting to run, or requeued
	stRunning               // running or suspended
	stExiting               // ends once an exit code is reported
	stDone                  // ended; the exit code decides
	stFailed                // ended as a failure whatever the exit code
	stNodeFail              // ended by a node failure
	stTimeout               // ended by the wall time limit
	stCancelled             // deleted (cancelled) by its owner
)

// jobStatusTable maps the normalised (upper case) jobStatus, history
// jobState and jobInitAttr.JobState values. The platform's own codes
// (spec/platform-evidence.md section 1) are listed with their "STAT"
// prefix; a value with the prefix that is not listed is read without it
// (statF reads as F). Keep it in step with the JobPhaseOf doc comment and
// docs/upstream-assumptions.md.
var jobStatusTable = map[string]statusClass{
	"STATQ": stQueued, "STATH": stQueued, "STATW": stQueued, "STATRQ": stQueued,
	"STATR": stRunning, "STATS": stRunning,
	"STATE": stExiting,
	"STATC": stDone,
	"STATD": stFailed, "STATN": stNodeFail, "STATT": stTimeout, "STATDE": stCancelled,
	// statX (other) and statEX (abnormal) are not final: a job that ends
	// leaves the realtime detail, and its history record says how.
	"STATX": stUnknown, "STATEX": stUnknown,

	"Q": stQueued, "H": stQueued, "W": stQueued, "T": stQueued, "M": stQueued,
	"QUEUED": stQueued, "PENDING": stQueued, "HELD": stQueued, "HOLD": stQueued,
	"WAITING": stQueued, "TRANSIT": stQueued, "MOVED": stQueued,
	"CONFIGURING": stQueued, "REQUEUED": stQueued,

	"R": stRunning, "S": stRunning, "RUNNING": stRunning, "SUSPENDED": stRunning,
	"STOPPED": stRunning,

	"E": stExiting, "EXITING": stExiting, "COMPLETING": stExiting,

	"C": stDone, "F": stDone, "COMPLETED": stDone, "COMPLETE": stDone,
	"DONE": stDone, "FINISHED": stDone, "EXITED": stDone,

	"D": stFailed, "FAILED": stFailed, "OUT_OF_MEMORY": stFailed, "BOOT_FAIL": stFailed,
	"PREEMPTED": stFailed, "KILLED": stFailed, "ABORTED": stFailed,

	"NODE_FAIL": stNodeFail, "NODE_ERROR": stNodeFail,
	"TIMEOUT": stTimeout, "DEADLINE": stTimeout,
	"DELETED": stCancelled, "CANCELLED": stCancelled, "CANCELED": stCancelled,
}

// statusReadings say in words what each class of status value means.
var statusReadings = map[statusClass]string{
	stQueued: "queued", stRunning: "running", stExiting: "exiting", stDone: "ended",
	stFailed: "failed", stNodeFail: "node failure", stTimeout: "timed out", stCancelled: "cancelled",
}

// StatusMeaning says what a platform status value (jobStatus, JobState:
// "statR", "Q", ...) means as JobPhaseOf reads it, "" for a value it does
// not know.
func StatusMeaning(v string) string { return statusReadings[classify(v)] }

func classify(v string) statusClass {
	v = strings.ToUpper(strings.TrimSpace(v))
	if c, ok := jobStatusTable[v]; ok {
		return c
	}
	if len(v) > 4 && strings.HasPrefix(v, "STAT") {
		return jobStatusTable[v[4:]]
	}
	return stUnknown
}

// JobState returns jobInitAttr.JobState (key matched case-insensitively).
func (d *JobDetail) JobState() string {
	if v, ok := d.JobInitAttr["JobState"]; ok {
		return v
	}
	for k, v := range d.JobInitAttr {
		if strings.EqualFold(k, "JobState") {
			return v
		}
	}
	return ""
}

// present reports whether a nullable scheduler value carries something.
func present(p *string) bool {
	if p == nil {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(*p)) {
	case "", "null", "-", "n/a", "none":
		return false
	}
	return true
}

// exitZero reports whether an exit code means success: "0", or "0:0" in
// the exit:signal form.
func exitZero(code string) bool {
	for part := range strings.SplitSeq(strings.TrimSpace(code), ":") {
		if strings.TrimSpace(part) != "0" {
			return false
		}
	}
	return true
}

// endClass is the strongest reading of d's jobStatus and JobState.
func endClass(d *JobDetail) statusClass {
	return max(classify(d.JobStatus), classify(d.JobState()))
}

// JobPhaseOf maps a job detail (realtime, or a history record's Detail)
// to a phase. jobStatus and jobInitAttr.JobState are matched
// case-insensitively against this table; the stronger reading of the two
// wins, in the order cancelled, timed out, node failure, failed, ended,
// exiting, running, queued:
//
//	value                                                 reading
//	statQ statH statW statRQ, Q H W T M, QUEUED PENDING   queued
//	  HELD HOLD WAITING TRANSIT MOVED CONFIGURING REQUEUED
//	statR statS, R S, RUNNING SUSPENDED STOPPED           running
//	statE, E, EXITING COMPLETING                          running until exitCode is present, then ended
//	statC, C F, COMPLETED COMPLETE DONE FINISHED EXITED   ended
//	statD, D, FAILED OUT_OF_MEMORY BOOT_FAIL PREEMPTED    failed whatever the exit code
//	  KILLED ABORTED
//	statN, NODE_FAIL NODE_ERROR                           failed: node failure
//	statT, TIMEOUT DEADLINE                               failed: timed out
//	statDE, DELETED CANCELLED CANCELED                    cancelled
//	statX statEX, anything else                           unknown (keep polling)
//
// A present jobEndTime (not empty, "null" or "-") also ends the job. An
// ended job Succeeded when exitCode is "0" (or "0:0"), no value reads
// failed and reason is not NonZeroExitCode (a statC that lags a failed
// scheduler job); otherwise it Failed, including when exitCode is missing
// (success must be shown, not assumed). A nil detail is Unknown.
func JobPhaseOf(d *JobDetail) JobPhase {
	if d == nil {
		return JobUnknown
	}
	c := endClass(d)
	ended := c >= stDone || present(d.JobEndTime) || (c == stExiting && present(d.ExitCode))
	switch {
	case c == stCancelled:
		return JobCancelled
	case ended && c < stFailed && present(d.ExitCode) && exitZero(*d.ExitCode) &&
		!strings.EqualFold(strings.TrimSpace(d.Reason), "NonZeroExitCode"):
		return JobSucceeded
	case ended:
		return JobFailed
	case c == stExiting || c == stRunning:
		return JobRunning
	case c == stQueued:
		return JobQueued
	}
	return JobUnknown
}

// JobEndKind names how a job ended when it did not simply exit.
type JobEndKind string

// The ways a job can end besides its script's exit.
const (
	EndExited      JobEndKind = ""
	EndTimedOut    JobEndKind = "timed_out"
	EndNodeFailure JobEndKind = "node_failure"
	EndCancelled   JobEndKind = "cancelled"
)

// JobEndKindOf reads how d's job ended from its status values.
func JobEndKindOf(d *JobDetail) JobEndKind {
	if d == nil {
		return EndExited
	}
	switch endClass(d) {
	case stTimeout:
		return EndTimedOut
	case stNodeFail:
		return EndNodeFailure
	case stCancelled:
		return EndCancelled
	}
	return EndExited
}

// JobEndReason says in words why a job that JobPhaseOf reads as Failed
// or Cancelled ended: "timed out after the requested wall time 00:10:00",
// "node failure on c01", "cancelled", "exit code 3", "the scheduler
// reports FAILED", ... It names the scheduler's values, never a guess.
func JobEndReason(d *JobDetail) string {
	if d == nil {
		return "no detail"
	}
	wall := cmp.Or(d.WalltimeReq, d.JobInitAttr["Resource_List.walltime"])
	switch endClass(d) {
	case stCancelled:
		return "cancelled (deleted) on the platform"
	case stTimeout:
		if wall != "" {
			return "timed out after the requested wall time " + wall
		}
		return "timed out: it ran past its requested wall time"
	case stNodeFail:
		if d.NodeUsed != "" {
			return "node failure on " + d.NodeUsed
		}
		return "node failure"
	}
	exit := "unknown"
	if present(d.ExitCode) {
		exit = strings.TrimSpace(*d.ExitCode)
	}
	state := strings.Trim(d.JobStatus+"/"+d.JobState(), "/")
	switch {
	case classify(d.JobState()) == stFailed || classify(d.JobStatus) == stFailed:
		return fmt.Sprintf("the scheduler reports it failed (%s, exit code %s)", state, exit)
	case strings.EqualFold(strings.TrimSpace(d.Reason), "NonZeroExitCode"):
		return fmt.Sprintf("it exited with a non-zero exit code (%s, reason NonZeroExitCode, exit code %s)", state, exit)
	case exit == "unknown":
		return fmt.Sprintf("it ended %s without an exit code", state)
	}
	return fmt.Sprintf("it ended %s with exit code %s", state, exit)
}

// JobVanished reports whether err, returned by Job for a job whose last
// seen detail had phase last ("" when no detail was seen yet), means the
// job disappeared after the platform had shown it: such a job will not come
// back and should not be polled further. A not-found for a job never seen
// may be the platform's lag after submitting and is not reported here.
func JobVanished(err error, last JobPhase) bool {
	return errors.Is(err, ErrJobNotFound) && last != "" && !last.Terminal()
}

// WaitJobOptions tunes WaitJob.
type WaitJobOptions struct {
	// Interval is the pause between two polls. Defaults to 30s.
	Interval time.Duration
	// NotFoundPolls is how many consecutive not-found answers are
	// tolerated before the job was first seen. Defaults to 3.
	NotFoundPolls int
	// OnPhase, if set, is called with each detail whose phase differs from
	// the previous one (the first detail included).
	OnPhase func(JobPhase, *JobDetail)
}

// WaitJob polls Job every opt.Interval (using the client's Sleep) until the
// job's phase is terminal and returns that last detail. It returns early
// with the error of a failed poll. A job that leaves the realtime detail
// after it was seen is looked up once in the history (HistoryJob), whose
// final record is returned as a detail (HistoryRecord.Detail); one missing
// there too (or not found NotFoundPolls times in a row before it was seen)
// gives an error matching ErrJobNotFound.
func (s *ClusterSession) WaitJob(ctx context.Context, jobID string, opt WaitJobOptions) (*JobDetail, error) {
	if opt.Interval <= 0 {
		opt.Interval = 30 * time.Second
	}
	if opt.NotFoundPolls <= 0 {
		opt.NotFoundPolls = 3
	}
	last, misses := JobUnknown, 0
	seen := false
	for {
		d, err := s.Job(ctx, jobID)
		switch {
		case err == nil:
			phase := JobPhaseOf(d)
			if opt.OnPhase != nil && (!seen || phase != last) {
				opt.OnPhase(phase, d)
			}
			seen, last, misses = true, phase, 0
			if phase.Terminal() {
				return d, nil
			}
		case errors.Is(err, ErrJobNotFound) && seen:
			// Ended jobs leave the realtime detail for the history.
			h, herr := s.HistoryJob(ctx, jobID, HistoryQuery{})
			if herr == nil && JobPhaseOf(h.Detail()).Terminal() {
				return h.Detail(), nil
			}
			return nil, fmt.Errorf("apiclient: compute job %s vanished after it was seen %s: %w", jobID, last, err)
		case errors.Is(err, ErrJobNotFound) && misses+1 < opt.NotFoundPolls:
			misses++
		default:
			return nil, err
		}
		if err := s.c.cfg.Sleep(ctx, opt.Interval); err != nil {
			return nil, err
		}
	}
}
