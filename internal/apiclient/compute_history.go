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
	"strconv"
	"strings"
	"time"
)

// The platform's job operations beyond compute-api.md
// (spec/platform-evidence.md sections 1 and 2): the job history, the list
// of current jobs and cancel. The realtime detail (Job) covers current jobs
// only; a job that ended is found in the history.

// PlatformZone is the time zone of the platform's job times
// ("2026-03-24 20:58:12" without a zone): China Standard Time, as its
// public clients assume.
var PlatformZone = time.FixedZone("UTC+8", 8*3600)

// PlatformTimeLayout is how the platform writes and reads job times.
const PlatformTimeLayout = "2006-01-02 15:04:05"

// listPageSize and maxListPages bound one list walk (history or realtime
// job list): at most 2000 jobs are read.
const (
	listPageSize = 100
	maxListPages = 20
)

// HistoryRecord is one job of the job history. The platform names the
// state jobState (a stat* code or a scheduler name such as COMPLETED or
// TIMEOUT) and the exit status jobExitStatus (a number, 0 normal); the
// other fields are read leniently like the job detail's.
type HistoryRecord struct {
	JobID         string  `json:"jobId"`
	JobName       string  `json:"jobName"`
	JobState      string  `json:"jobState"`
	JobExitStatus *string `json:"jobExitStatus"`
	JobQueueTime  string  `json:"jobQueueTime"`
	JobStartTime  string  `json:"jobStartTime"`
	JobEndTime    *string `json:"jobEndTime"`
	AcctTime      string  `json:"acctTime"`
	JobManagerID  string  `json:"jobmanagerId"`
	Queue         string  `json:"queue"`
	WorkDir       string  `json:"workdir"`
	Stdout        string  `json:"stdout"`
	Stderr        string  `json:"stderr"`
	// Walltime is the requested wall time in seconds.
	Walltime    int64  `json:"walltime"`
	JobExecHost string `json:"jobExecHost"`
	Reason      string `json:"reason"`

	raw json.RawMessage
}

// UnmarshalJSON decodes a history record leniently and keeps the record
// for Usage.
func (h *HistoryRecord) UnmarshalJSON(b []byte) error {
	if err := decodeLenient(b, h); err != nil {
		return err
	}
	h.raw = bytes.Clone(b)
	return nil
}

// accountingKeys are the history record's accounting fields that make a
// compute job's usage (docs/events.md#events).
var accountingKeys = []string{
	"cpuNuclearHour", "cpuNuclearSec", "gpuCardHour", "gpuCardSec", "dcuCardHour", "dcuCardSec",
	"jobWalltimeUsed", "jobCpuTime", "jobMemUsed", "jobVmemUsed", "walltime",
	"cpuUnitPrice", "gpuUnitPrice", "dcuUnitPrice", "historyQueuerate", "efficiencyCpu",
	"jobProcNum", "jobGpuNum", "jobDcuNum", "nodect",
}

// Usage returns the record's accounting fields, verbatim, as a JSON
// object; nil when it has none.
func (h *HistoryRecord) Usage() json.RawMessage {
	if h == nil || len(h.raw) == 0 {
		return nil
	}
	var all map[string]json.RawMessage
	if json.Unmarshal(h.raw, &all) != nil {
		return nil
	}
	out := make(map[string]json.RawMessage)
	for _, k := range accountingKeys {
		if v, ok := all[k]; ok && !isNull(v) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}

// Detail renders the record as a job detail, so JobPhaseOf and
// JobEndReason read both sources alike: jobState becomes jobStatus,
// jobExitStatus the exit code, stdout and stderr the output and error
// paths. A history record is final, so statE (exited) reads as ended.
func (h *HistoryRecord) Detail() *JobDetail {
	d := &JobDetail{
		JobID: h.JobID, JobName: h.JobName, JobStatus: h.JobState, Queue: h.Queue,
		JobSubmitTime: h.JobQueueTime, JobStartTime: h.JobStartTime, JobEndTime: h.JobEndTime,
		ExitCode: h.JobExitStatus, NodeUsed: h.JobExecHost, WorkDir: h.WorkDir,
		OutputPath: h.Stdout, ErrorPath: h.Stderr, JobManagerID: h.JobManagerID, Reason: h.Reason,
	}
	if h.Walltime > 0 {
		d.WalltimeReq = FormatWallTime(time.Duration(h.Walltime) * time.Second)
	}
	if classify(h.JobState) == stExiting && !present(d.JobEndTime) {
		end := cmp.Or(h.AcctTime, "exited")
		d.JobEndTime = &end
	}
	return d
}

// HistoryQuery narrows a history lookup.
type HistoryQuery struct {
	// SchedulerID is the job's scheduler (jobmanagerId). Defaults to
	// SchedulerID(ctx).
	SchedulerID string
	// AcctTime is the record's accounting time, when known: it speeds up
	// the one-job lookup.
	AcctTime string
	// Since and Until bound the list's time range. Default to 7 days
	// before Until and an hour after now.
	Since, Until time.Time
}

func (s *ClusterSession) historyDefaults(ctx context.Context, q HistoryQuery) (HistoryQuery, error) {
	id, err := s.schedulerOr(ctx, q.SchedulerID)
	if err != nil {
		return q, err
	}
	q.SchedulerID = id
	if q.Until.IsZero() {
		q.Until = s.c.cfg.Now().Add(time.Hour)
	}
	if q.Since.IsZero() {
		q.Since = q.Until.Add(-7 * 24 * time.Hour)
	}
	return q, nil
}

// HistoryJob looks job jobID up in the job history: first the one-job
// history (GET .../historyjobs/{jobmanagerId}/{jobId}, with acctTime when
// known), then the history list filtered by the job id. It returns the
// record, or an error matching ErrJobNotFound when the list answered
// without it, ErrNotSupported when the platform has neither call
// (compute-api.md's letter), or another error when the platform said
// nothing certain.
func (s *ClusterSession) HistoryJob(ctx context.Context, jobID string, q HistoryQuery) (*HistoryRecord, error) {
	if err := checkSegment("jobID", jobID); err != nil {
		return nil, err
	}
	q, err := s.historyDefaults(ctx, q)
	if err != nil {
		return nil, err
	}
	one, oneErr := s.historyOne(ctx, q.SchedulerID, jobID, q.AcctTime)
	if oneErr == nil {
		return one, nil
	}
	recs, listErr := s.historyList(ctx, q, jobID, func(h *HistoryRecord) bool { return h.JobID == jobID })
	if listErr == nil && len(recs) > 0 {
		return &recs[0], nil
	}
	switch {
	case listErr == nil:
		return nil, fmt.Errorf("apiclient: compute job %s: %w: not in the job history", jobID, ErrJobNotFound)
	case errors.Is(listErr, ErrNotSupported):
		return nil, oneErr
	}
	return nil, listErr
}

// HistoryJobs lists the history records of q's scheduler and time range
// that keep returns true for (every record when keep is nil), walking at
// most 2000 records.
func (s *ClusterSession) HistoryJobs(ctx context.Context, q HistoryQuery, keep func(*HistoryRecord) bool) ([]HistoryRecord, error) {
	q, err := s.historyDefaults(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.historyList(ctx, q, "", keep)
}

func (s *ClusterSession) historyOne(ctx context.Context, schedID, jobID, acctTime string) (*HistoryRecord, error) {
	var query url.Values
	if acctTime != "" {
		query = url.Values{"acctTime": {acctTime}}
	}
	res, err := s.c.exchange(ctx, s, &request{
		op: "job history", method: http.MethodGet, svc: svcHPC, auth: true,
		path:     "/hpc/openapi/v2/historyjobs/" + url.PathEscape(schedID) + "/" + url.PathEscape(jobID),
		pathTmpl: "/hpc/openapi/v2/historyjobs/{jobmanager_id}/{job_id}",
		query:    query, class: classIdempotent,
	})
	if err != nil {
		return nil, historyError(jobID, err)
	}
	var h HistoryRecord
	if len(bytes.TrimSpace(res.data)) == 0 || isNull(res.data) || bytes.Equal(bytes.TrimSpace(res.data), []byte("{}")) {
		return nil, fmt.Errorf("apiclient: compute job %s: %w: the history answered no record", jobID, ErrJobNotFound)
	}
	if err := json.Unmarshal(res.data, &h); err != nil {
		return nil, fmt.Errorf("apiclient: compute job history %s: %w: %w", jobID, ErrMalformedResponse, err)
	}
	if h.JobID != "" && h.JobID != jobID {
		return nil, fmt.Errorf("apiclient: compute job %s: %w: the history answered job %s", jobID, ErrJobNotFound, h.JobID)
	}
	if strings.TrimSpace(h.JobState) == "" {
		// Not a record this client can read (another shape): the list
		// is asked instead.
		return nil, fmt.Errorf("apiclient: compute job history %s: %w: the record has no jobState", jobID, ErrMalformedResponse)
	}
	h.JobID = jobID
	return &h, nil
}

// historyError maps a history call's error: no route is ErrNotSupported,
// an answer saying the job is missing is ErrJobNotFound.
func historyError(jobID string, err error) error {
	env, ok := errors.AsType[*EnvelopeError](err)
	switch {
	case ok && env.noRoute():
		return fmt.Errorf("%w: %w", ErrNotSupported, err)
	case ok && jobID != "" && env.saysMissing():
		return fmt.Errorf("apiclient: compute job %s: %w: %w", jobID, ErrJobNotFound, err)
	}
	return err
}

// historyList walks GET .../historyjobs. Public clients name the
// scheduler strClusterNameList or strClusterIDList; both are sent.
func (s *ClusterSession) historyList(ctx context.Context, q HistoryQuery, jobID string, keep func(*HistoryRecord) bool) ([]HistoryRecord, error) {
	base := url.Values{
		"strClusterNameList": {q.SchedulerID}, "strClusterIDList": {q.SchedulerID},
		"timeType": {"CUSTOM"}, "isQueryByQueueTime": {"false"},
		"startTime": {q.Since.In(PlatformZone).Format(PlatformTimeLayout)},
		"endTime":   {q.Until.In(PlatformZone).Format(PlatformTimeLayout)},
	}
	if jobID != "" {
		base.Set("jobId", jobID)
	}
	var out []HistoryRecord
	err := s.walkList(ctx, "job history list", "/hpc/openapi/v2/historyjobs", base, maxListPages, func(item json.RawMessage) error {
		var h HistoryRecord
		if err := json.Unmarshal(item, &h); err != nil {
			return err
		}
		if keep == nil || keep(&h) {
			out = append(out, h)
		}
		return nil
	})
	if err != nil {
		return nil, historyError("", err)
	}
	return out, nil
}

// walkList reads a paged list (start, limit) at path, calling each for
// every item, until an empty page, the total, a short page when the
// answer gives no total, or maxPages. start advances by the items a page
// held, so a platform that cuts pages below the limit asked is read whole
// where it says its total.
func (s *ClusterSession) walkList(ctx context.Context, op, path string, query url.Values, maxPages int, each func(json.RawMessage) error) error {
	read := 0
	for range maxPages {
		q := url.Values{}
		for k, v := range query {
			q[k] = v
		}
		q.Set("start", strconv.Itoa(read))
		q.Set("limit", strconv.Itoa(listPageSize))
		res, err := s.c.exchange(ctx, s, &request{
			op: op, method: http.MethodGet, svc: svcHPC, auth: true,
			path: path, query: q, class: classIdempotent,
		})
		if err != nil {
			return err
		}
		items, total, err := listItems(res.data)
		if err != nil {
			return fmt.Errorf("apiclient: compute %s: %w: %w", op, ErrMalformedResponse, err)
		}
		for i, item := range items {
			if err := each(item); err != nil {
				return fmt.Errorf("apiclient: compute %s: %w: item %d: %w", op, ErrMalformedResponse, read+i, err)
			}
		}
		read += len(items)
		if len(items) == 0 || (total >= 0 && read >= total) || (total < 0 && len(items) < listPageSize) {
			return nil
		}
	}
	return nil
}

// listItems reads a list answer: an array, or an object holding the array
// under list, records, items or rows (clients see all four) and the
// count under total (-1 when absent).
func listItems(data json.RawMessage) ([]json.RawMessage, int, error) {
	if len(bytes.TrimSpace(data)) == 0 || isNull(data) {
		return nil, 0, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(data, &items) == nil {
		return items, -1, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, 0, errors.New("data is neither a list nor an object")
	}
	total := -1
	if t, ok := obj["total"]; ok {
		if n, err := lenientInt(t); err == nil {
			total = int(n)
		}
	}
	for _, k := range []string{"list", "records", "items", "rows"} {
		if v, ok := obj[k]; ok && !isNull(v) {
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, 0, fmt.Errorf("data.%s is not a list", k)
			}
			return items, total, nil
		}
	}
	return nil, total, nil
}

// JobSummary is one job of the realtime job list. Clients see the same
// values under two names (jobStatus or jobState, jobSubmitTime or
// jobQueueTime); either is read.
type JobSummary struct {
	JobID      string
	JobName    string
	Status     string
	SubmitTime string
	WorkDir    string
	OutputPath string
}

// UnmarshalJSON decodes a job list item leniently.
func (j *JobSummary) UnmarshalJSON(b []byte) error {
	var v struct {
		JobID         string `json:"jobId"`
		JobName       string `json:"jobName"`
		JobStatus     string `json:"jobStatus"`
		JobState      string `json:"jobState"`
		JobSubmitTime string `json:"jobSubmitTime"`
		JobQueueTime  string `json:"jobQueueTime"`
		WorkDir       string `json:"workDir"`
		OutputPath    string `json:"outputPath"`
	}
	if err := decodeLenient(b, &v); err != nil {
		return err
	}
	*j = JobSummary{
		JobID: v.JobID, JobName: v.JobName, Status: cmp.Or(v.JobStatus, v.JobState),
		SubmitTime: cmp.Or(v.JobSubmitTime, v.JobQueueTime), WorkDir: v.WorkDir, OutputPath: v.OutputPath,
	}
	return nil
}

// Jobs lists the current jobs of scheduler schedulerID (GET .../jobs
// ?strClusterIDList=), at most 2000. An empty schedulerID means
// SchedulerID(ctx). Errors match ErrNotSupported where the platform has no
// job list.
func (s *ClusterSession) Jobs(ctx context.Context, schedulerID string) ([]JobSummary, error) {
	schedulerID, err := s.schedulerOr(ctx, schedulerID)
	if err != nil {
		return nil, err
	}
	var out []JobSummary
	err = s.walkList(ctx, "job list", "/hpc/openapi/v2/jobs", url.Values{"strClusterIDList": {schedulerID}}, maxListPages, func(item json.RawMessage) error {
		var j JobSummary
		if err := json.Unmarshal(item, &j); err != nil {
			return err
		}
		out = append(out, j)
		return nil
	})
	if err != nil {
		return nil, historyError("", err)
	}
	return out, nil
}

// CancelJob asks the platform to delete (cancel) job jobID of scheduler
// schedulerID run by cluster user userName (DELETE .../jobs, form
// jobMethod=5, strJobInfoMap=<scheduler id>,<user>:<job id>:). Deleting
// twice does no harm, so it is retried like a read. Empty schedulerID and
// userName mean SchedulerID(ctx) and UserName(). Success says only that
// the platform took the request: read the job to learn its end. Errors
// match ErrNotSupported where the platform has no cancel (compute-api.md's
// letter) and ErrJobNotFound where it says the job is not there.
func (s *ClusterSession) CancelJob(ctx context.Context, schedulerID, userName, jobID string) error {
	if err := checkSegment("jobID", jobID); err != nil {
		return err
	}
	if strings.ContainsAny(jobID, ",:;") {
		return invalidArg("jobID", "must not contain , : or ;")
	}
	userName = cmp.Or(userName, s.UserName())
	if userName == "" || strings.ContainsAny(userName, ",:;") {
		return invalidArg("userName", "is required (the center names no user) and must not contain , : or ;")
	}
	if schedulerID == "" {
		id, err := s.SchedulerID(ctx)
		if err != nil {
			return err
		}
		schedulerID = id
	}
	_, err := s.c.exchange(ctx, s, &request{
		op: "cancel job", method: http.MethodDelete, svc: svcHPC, auth: true,
		path: "/hpc/openapi/v2/jobs",
		form: url.Values{
			"jobMethod":     {"5"},
			"strJobInfoMap": {schedulerID + "," + userName + ":" + jobID + ":"},
		},
		class: classIdempotent,
	})
	if err != nil {
		return historyError(jobID, err)
	}
	return nil
}
