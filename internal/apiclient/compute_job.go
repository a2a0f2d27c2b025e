package apiclient

import (
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
// *EnvelopeError (the platform refused the job), network errors (nothing
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
		return "", err
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
// network errors, 429 and 5xx. An error envelope or HTTP 404 that is not a
// token problem means the platform does not know the job: the error then
// matches ErrJobNotFound (and still unwraps to the *EnvelopeError). See
// JobPhaseOf to interpret the detail and JobVanished to judge a not-found.
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
		if env, ok := errors.AsType[*EnvelopeError](err); ok && !env.authRejected() &&
			(env.Status == http.StatusNotFound || (env.Status >= 200 && env.Status < 300)) {
			return nil, fmt.Errorf("apiclient: compute job %s: %w: %w", jobID, ErrJobNotFound, err)
		}
		return nil, err
	}
	if isNull(res.data) {
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

// The phases of a compute job. Succeeded and Failed are terminal; Unknown
// means "not recognised, keep polling".
const (
	JobUnknown   JobPhase = "unknown"
	JobQueued    JobPhase = "queued"
	JobRunning   JobPhase = "running"
	JobSucceeded JobPhase = "succeeded"
	JobFailed    JobPhase = "failed"
)

// Terminal reports whether p is Succeeded or Failed.
func (p JobPhase) Terminal() bool { return p == JobSucceeded || p == JobFailed }

// statusClass is how JobPhaseOf reads one status value.
type statusClass int

const (
	stUnknown statusClass = iota
	stQueued
	stRunning
	stExiting // ends once an exit code is reported
	stDone    // ended; the exit code decides
	stFailed  // ended as a failure whatever the exit code
)

// jobStatusTable maps the normalised jobStatus (upper case, "STAT" prefix
// removed) and jobInitAttr.JobState values. Keep it in step with the
// JobPhaseOf doc comment and docs/upstream-assumptions.md.
var jobStatusTable = map[string]statusClass{
	"Q": stQueued, "H": stQueued, "W": stQueued, "T": stQueued, "M": stQueued,
	"QUEUED": stQueued, "PENDING": stQueued, "HELD": stQueued, "HOLD": stQueued,
	"WAITING": stQueued, "TRANSIT": stQueued, "MOVED": stQueued,
	"CONFIGURING": stQueued, "REQUEUED": stQueued,

	"R": stRunning, "S": stRunning, "RUNNING": stRunning, "SUSPENDED": stRunning,
	"STOPPED": stRunning,

	"E": stExiting, "EXITING": stExiting, "COMPLETING": stExiting,

	"C": stDone, "F": stDone, "COMPLETED": stDone, "COMPLETE": stDone,
	"DONE": stDone, "FINISHED": stDone, "EXITED": stDone,

	"D": stFailed, "DELETED": stFailed, "FAILED": stFailed, "CANCELLED": stFailed,
	"CANCELED": stFailed, "TIMEOUT": stFailed, "NODE_FAIL": stFailed,
	"OUT_OF_MEMORY": stFailed, "BOOT_FAIL": stFailed, "DEADLINE": stFailed,
	"PREEMPTED": stFailed, "KILLED": stFailed, "ABORTED": stFailed,
}

func classify(v string) statusClass {
	v = strings.ToUpper(strings.TrimSpace(v))
	if len(v) > 4 && strings.HasPrefix(v, "STAT") {
		v = v[4:]
	}
	return jobStatusTable[v]
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

// JobPhaseOf maps a job detail to a phase. jobStatus is read without its
// "stat" prefix; it and jobInitAttr.JobState are matched case-insensitively
// against this table (the stronger reading of the two wins, in the order
// ended-failed, ended, exiting, running, queued):
//
//	value                                                 reading
//	Q H W T M, QUEUED PENDING HELD HOLD WAITING TRANSIT   queued
//	  MOVED CONFIGURING REQUEUED
//	R S, RUNNING SUSPENDED STOPPED                        running
//	E, EXITING COMPLETING                                 running until exitCode is present, then ended
//	C F, COMPLETED COMPLETE DONE FINISHED EXITED          ended
//	D, DELETED FAILED CANCELLED CANCELED TIMEOUT          ended, failed whatever the exit code
//	  NODE_FAIL OUT_OF_MEMORY BOOT_FAIL DEADLINE
//	  PREEMPTED KILLED ABORTED
//	anything else                                         unknown (keep polling)
//
// A present jobEndTime (not empty, "null" or "-") also ends the job. An
// ended job Succeeded when exitCode is "0" (or "0:0") and no value reads
// failed; otherwise it Failed, including when exitCode is missing (success
// must be shown, not assumed). A nil detail is Unknown.
func JobPhaseOf(d *JobDetail) JobPhase {
	if d == nil {
		return JobUnknown
	}
	a, b := classify(d.JobStatus), classify(d.JobState())
	has := func(c statusClass) bool { return a == c || b == c }
	ended := has(stFailed) || has(stDone) || present(d.JobEndTime) ||
		(has(stExiting) && present(d.ExitCode))
	switch {
	case ended && !has(stFailed) && present(d.ExitCode) && exitZero(*d.ExitCode):
		return JobSucceeded
	case ended:
		return JobFailed
	case has(stExiting) || has(stRunning):
		return JobRunning
	case has(stQueued):
		return JobQueued
	}
	return JobUnknown
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
// with the error of a failed poll; a job that disappears after it was seen
// (or is not found NotFoundPolls times in a row before) gives an error
// matching ErrJobNotFound.
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
