package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// runCompute runs a compute job: upload inputs, check the queue, submit
// (unless the record says it was submitted), poll the job until it ends,
// then collect stdout, stderr and the declared outputs. A cancel before
// the submit ends the job without it; after the submit the job is deleted
// upstream and ends cancelled once the platform shows it so (waitJob).
func (r *Runner) runCompute(ctx context.Context, j *job) error {
	if r.cfg.Compute == nil {
		return fail(CodeUpstreamUnavailable, state.StageSubmit, true, "the compute platform is not configured (SLUICE_COMPUTE_BASE_URL is empty)")
	}
	spec := j.spec.Compute
	cluster := spec.Cluster
	if j.rec.Upstream.ClusterID != "" {
		cluster = j.rec.Upstream.ClusterID
	}
	sess, err := r.cfg.Compute.Cluster(ctx, cluster)
	if err != nil {
		what := "open cluster session"
		if spec.Cluster != "" {
			what = "compute.cluster: " + what
		}
		return computeError(state.StageSubmit, what, err)
	}
	if !submittedOrLater(j.rec.Status) {
		if err := r.submitCompute(ctx, j, sess); err != nil {
			return err
		}
	} else {
		// Resumed: the job is upstream already.
		r.takeQuota(j)
	}
	j.log = j.log.With().Str("cluster_id", j.rec.Upstream.ClusterID).Str("upstream_job_id", j.rec.Upstream.JobID).Logger()
	detail, phase, err := r.waitJob(ctx, j, sess)
	if err != nil {
		return err
	}
	// The job no longer counts upstream while its files are copied.
	r.releaseQuota(j)
	if phase == apiclient.JobCancelled {
		j.log.Info().Str("upstream_status", detail.JobStatus).Msg("compute job cancelled upstream")
		return errCancelled
	}
	uncollected := ""
	if err := r.collectCompute(ctx, j, sess, detail); err != nil {
		// A failed job often leaves its outputs unwritten: that must not
		// hide why it failed. Transient errors still redeliver it.
		var f *failure
		if phase != apiclient.JobFailed || !errors.As(err, &f) {
			return err
		}
		uncollected = "; not every file was collected: " + f.msg
	}
	if phase == apiclient.JobFailed {
		code := CodeExitStatus
		switch apiclient.JobEndKindOf(detail) {
		case apiclient.EndTimedOut:
			code = CodeWallTimeExceeded
		case apiclient.EndNodeFailure:
			code = CodeNodeFailure
		}
		return fail(code, state.StagePoll, false, "job %s failed: %s%s", j.rec.Upstream.JobID, apiclient.JobEndReason(detail), uncollected)
	}
	return nil
}

// submitCompute uploads the inputs, checks the queue and sends the job.
func (r *Runner) submitCompute(ctx context.Context, j *job, sess *apiclient.ClusterSession) error {
	spec := j.spec.Compute
	for i, in := range spec.Inputs {
		if j.stopping() {
			return errStopping
		}
		if j.cancelled() {
			return errCancelled
		}
		name := path.Base(sourcePath(in.From))
		// A later delivery overwrites what an earlier one of the same job
		// uploaded, whatever cover says.
		cover := in.Cover || j.rec.Attempts > 1
		err := sess.Upload(ctx, in.To, name, cover, r.inputOpener(ctx, in.From))
		if err != nil {
			field := fmt.Sprintf("compute.inputs[%d]", i)
			var f *failure
			var ie *inputError
			switch {
			case errors.As(err, &f):
				return f
			case errors.As(err, &ie) && artifacts.IsTemporary(ie.err):
				// S3 or the input's server is away for a while: like
				// every transient error, the job is redelivered.
				return transient(fmt.Errorf("%s: %w", field, err))
			case errors.As(err, &ie):
				return fail(CodeInputFetchFailed, state.StageSubmit, true, "%s: %v", field, err)
			}
			return computeError(state.StageSubmit, field+": upload", err)
		}
	}
	schedID, err := sess.SchedulerID(ctx)
	if err != nil {
		return computeError(state.StageSubmit, "query cluster", err)
	}
	queue := cmp.Or(spec.Job.Extra["GAP_QUEUE"], spec.Job.Queue)
	if queue != "" {
		queues, err := sess.Queues(ctx, sess.UserName(), schedID)
		if err != nil {
			return computeError(state.StageSubmit, "query queues", err)
		}
		names := make([]string, len(queues))
		for i, q := range queues {
			names[i] = q.QueueName
		}
		switch {
		case len(queues) == 0:
			// The platform answers no list for some users and regions:
			// that refuses nothing, the submit is the judge.
			j.log.Warn().Str("queue", queue).Msg("the platform lists no queues for the user; submitting to the queue unchecked")
		case !slices.Contains(names, queue):
			return fail(CodeQueueUnavailable, state.StageSubmit, true,
				"compute.job.queue: queue %q is not available to user %s (available: %s)", queue, sess.UserName(), strings.Join(names, ", "))
		}
	}
	if j.cancelled() {
		return errCancelled
	}
	if err := r.acquireQuota(ctx, j); err != nil {
		return err
	}
	req := spec.Request(jobspec.ComputeTarget{JobID: j.id, SchedulerID: schedID, ClusterID: sess.ClusterID()})

	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitTimeout)
	defer cancel()
	name, _ := req.MapAppJobInfo[apiclient.KeyJobName].(string)
	// A record at "submitting" is a submit whose answer nobody recorded:
	// the platform may hold that job, and a second one would be paid twice.
	earlier := j.rec.Status == state.StatusSubmitting
	since := j.rec.UpdatedAt
	if earlier {
		id, found, err := r.findSubmitted(sctx, j, sess, schedID, name, since)
		switch {
		case err != nil:
			return transient(fmt.Errorf("look for the job an earlier submit created: %w", err))
		case found:
			return r.adoptSubmitted(sctx, j, sess, id)
		}
	}
	if err := r.claimSubmit(sctx, j, func(rec *state.Record) {
		rec.Upstream.ClusterID = sess.ClusterID()
	}); err != nil {
		return transient(err)
	}
	if !earlier {
		since = j.rec.UpdatedAt
	}
	jobID, err := sess.SubmitJob(sctx, spec.Template.Type, spec.Template.Name, req)
	if errors.Is(err, apiclient.ErrAmbiguous) {
		id, found, ferr := r.findSubmitted(sctx, j, sess, schedID, name, since)
		if found {
			j.log.Warn().Err(err).Str("upstream_job_id", id).Msg("submit answer lost; found the job it created")
			jobID, err = id, nil
		} else if ferr != nil {
			err = fmt.Errorf("%w (and looking for the job failed: %v)", err, ferr)
		}
	}
	if err != nil {
		if errors.Is(err, apiclient.ErrAmbiguous) || !isTransientCompute(err) {
			return r.submitError(sctx, j, asPermanent(err))
		}
		return r.submitError(sctx, j, err)
	}
	return r.adoptSubmitted(sctx, j, sess, jobID)
}

// adoptSubmitted records jobID as j's upstream job ("submitted").
func (r *Runner) adoptSubmitted(sctx context.Context, j *job, sess *apiclient.ClusterSession, jobID string) error {
	now := r.cfg.Now().UTC()
	upstreamID := func(rec *state.Record) string { return rec.Upstream.JobID }
	err := r.writeRetried(sctx, j, submitWindow(jobID, upstreamID), state.StatusSubmitted, set(func(rec *state.Record) {
		rec.Upstream.ClusterID = sess.ClusterID()
		rec.Upstream.JobID = jobID
		rec.SubmittedAt = &now
	}))
	if errors.Is(err, errSuperseded) {
		j.log.Warn().Str("upstream_job_id", jobID).Msg(LogSubmitSuperseded)
		return err
	}
	if err != nil {
		j.log.Error().Err(err).Str("upstream_job_id", jobID).Msg("job submitted but its id could not be recorded")
		return transient(err)
	}
	j.log.Info().Str("upstream_job_id", jobID).Msg("compute job submitted")
	r.publishProgress(sctx, j, state.StatusSubmitted)
	return nil
}

// submitSkew is how far before sluice's submit a job the platform lists
// may say it was submitted and still be the one sluice sent: clocks and
// the zone the platform writes its times in may differ.
const submitSkew = 12 * time.Hour

// findSubmitted looks for the job an earlier submit of j created: a job
// named name (GAP_JOB_NAME, the sluice job id unless the spec names it)
// submitted since (less submitSkew), in the realtime job list and then the
// history. found is true only when exactly one job matches; two or more
// cannot be told apart, and a platform without those lists (compute-api.md's
// letter) cannot tell at all: both answer not found, without error.
func (r *Runner) findSubmitted(ctx context.Context, j *job, sess *apiclient.ClusterSession, schedID, name string, since time.Time) (id string, found bool, err error) {
	if name == "" {
		return "", false, nil
	}
	after := since.Add(-submitSkew)
	matches := map[string]bool{}
	jobs, err := sess.Jobs(ctx, schedID)
	switch {
	case errors.Is(err, apiclient.ErrNotSupported):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	for _, s := range jobs {
		if s.JobName == name && submittedAfter(s.SubmitTime, after) {
			matches[s.JobID] = true
		}
	}
	recs, err := sess.HistoryJobs(ctx, apiclient.HistoryQuery{SchedulerID: schedID, Since: after},
		func(h *apiclient.HistoryRecord) bool {
			return h.JobName == name && submittedAfter(h.JobQueueTime, after)
		})
	if err != nil && !errors.Is(err, apiclient.ErrNotSupported) {
		return "", false, err
	}
	for _, h := range recs {
		matches[h.JobID] = true
	}
	if len(matches) != 1 {
		if len(matches) > 1 {
			j.log.Warn().Int("candidates", len(matches)).Str("job_name", name).Msg("several platform jobs match the lost submit; cannot tell which is this job's")
		}
		return "", false, nil
	}
	for id := range matches {
		return id, true, nil
	}
	return "", false, nil
}

// submittedAfter reports whether a platform time (in its zone; an
// unreadable or empty one counts as a match) is not before t.
func submittedAfter(platformTime string, t time.Time) bool {
	at, err := time.ParseInLocation(apiclient.PlatformTimeLayout, strings.TrimSpace(platformTime), apiclient.PlatformZone)
	return err != nil || !at.Before(t)
}

// notFoundPolls is how many not-found answers in a row a job the platform
// has not shown yet gets before it counts as vanished: right after a
// submit the platform may lag (apiclient.WaitJobOptions.NotFoundPolls).
const notFoundPolls = 3

// historySearch bounds the search for a job that left the realtime detail
// after it was seen: it counts as vanished only when neither the realtime
// detail nor the job history has had it for this long, over at least
// notFoundPolls lookups. The platform writes a job's history record when
// it accounts for it, which live answers show within a minute of the end.
const historySearch = 5 * time.Minute

// waitJob polls the job every ComputePoll until it ends and returns its
// last detail: the realtime one, or its history record's
// (apiclient.HistoryRecord.Detail) once the realtime detail no longer has
// it or answers an error. The history record's accounting becomes the
// job's usage. A cancel request deletes the job upstream (cancelJob) and
// polling goes on until the platform shows how the job ended.
func (r *Runner) waitJob(ctx context.Context, j *job, sess *apiclient.ClusterSession) (*apiclient.JobDetail, apiclient.JobPhase, error) {
	// The job waits hours, holding its goroutine: let other jobs start.
	j.d.Started()
	jobID := j.rec.Upstream.JobID
	since := r.cfg.Now()
	if j.rec.SubmittedAt != nil {
		since = *j.rec.SubmittedAt
	}
	deadline := since.Add(r.cfg.ComputeTimeout)
	// last is the phase the platform last showed, "" while it has shown
	// none (to this attempt or, as far as the record says, to an earlier
	// one); misses counts the answers in a row that had no job, and
	// missingSince is when they began.
	var last apiclient.JobPhase
	misses, missingSince := 0, time.Time{}
	if j.rec.Status == state.StatusRunning || j.rec.Status == state.StatusCollecting {
		// Collecting: it finished before a restart, and is found again in
		// the realtime detail or the history.
		last = apiclient.JobRunning
	}
	hq := apiclient.HistoryQuery{SchedulerID: "", Since: since.Add(-submitSkew)}
	cancelSent, cancelWake := false, j.cancel
	wait := time.Duration(0)
	for {
		select {
		case <-j.d.Stopping():
			return nil, "", errStopping
		case <-ctx.Done():
			return nil, "", errStopping
		case <-cancelWake:
			cancelWake = nil
		case <-time.After(wait):
		}
		wait = r.cfg.ComputePoll
		if !cancelSent && j.cancelled() {
			cancelSent = r.cancelJob(ctx, j, sess)
		}
		d, err := sess.Job(ctx, jobID)
		var usage json.RawMessage
		if err == nil && apiclient.JobPhaseOf(d).Terminal() {
			// Ended: the history has its accounting (and the exit status
			// a lagging realtime detail may lack). One lookup; the
			// realtime detail stands alone where the history is silent.
			if h, herr := sess.HistoryJob(ctx, jobID, hq); herr == nil && apiclient.JobPhaseOf(h.Detail()).Terminal() {
				d, usage = mergeEnd(d, h), h.Usage()
			}
		}
		noHistory := false
		if err != nil {
			h, herr := sess.HistoryJob(ctx, jobID, hq)
			noHistory = errors.Is(herr, apiclient.ErrNotSupported)
			switch {
			case herr == nil:
				j.log.Debug().Err(err).Str("history_state", h.JobState).Msg("job read from the job history")
				d, usage, err = h.Detail(), h.Usage(), nil
			case errors.Is(herr, apiclient.ErrJobNotFound), errors.Is(herr, apiclient.ErrNotSupported):
			default:
				j.log.Warn().Err(herr).Msg("job history query failed")
			}
		}
		if err != nil {
			notFound := errors.Is(err, apiclient.ErrJobNotFound)
			if notFound {
				if misses == 0 {
					missingSince = r.cfg.Now()
				}
				misses++
			}
			switch {
			case notFound && last == "" && misses >= notFoundPolls:
				return nil, "", fail(CodeJobVanished, state.StagePoll, false, "job %s, accepted at submit, is unknown to the platform (not found %d times in a row), nor in the job history", jobID, misses)
			case notFound && last != "" && misses >= notFoundPolls && r.cfg.Now().Sub(missingSince) >= historySearch:
				return nil, "", fail(CodeJobVanished, state.StagePoll, false, "job %s disappeared from the platform: it was last seen %s, and neither the job detail nor the job history has had it for %s", jobID, last, historySearch)
			case notFound && last != "" && noHistory:
				// A platform without a history (compute-api.md's letter)
				// keeps ended jobs in the detail: gone means gone.
				return nil, "", fail(CodeJobVanished, state.StagePoll, false, "job %s disappeared from the platform: it was last seen %s", jobID, last)
			case r.cfg.Now().After(deadline):
				return nil, "", r.timedOut(ctx, j, sess, fmt.Sprintf(" (last query: %v)", err))
			case !notFound:
				j.log.Warn().Err(err).Msg("job query failed")
			}
			continue
		}
		misses = 0
		phase := apiclient.JobPhaseOf(d)
		exit, status := d.ExitCode, statusOfPhase(phase, j.rec.Status)
		if usage != nil {
			j.unrecorded = func(rec *state.Record) { rec.Usage = usage }
		}
		if r.pollNews(j, status, d) || j.unrecorded != nil {
			if err := r.write(ctx, j, live, status, set(func(rec *state.Record) {
				rec.Upstream.Status = d.JobStatus
				rec.Upstream.State = d.JobState()
				rec.Upstream.ExitCode = exit
			})); err != nil {
				return nil, "", transient(err)
			}
		}
		if phase == apiclient.JobRunning && last != apiclient.JobRunning {
			r.publishProgress(ctx, j, state.StatusRunning)
		}
		if phase != apiclient.JobUnknown {
			last = phase
		}
		if phase.Terminal() {
			return d, phase, nil
		}
		if r.cfg.Now().After(deadline) {
			return nil, "", r.timedOut(ctx, j, sess, "")
		}
	}
}

// timedOut fails j, not finished after SLUICE_COMPUTE_TIMEOUT, once it has
// asked the platform to delete the job: a job sluice gives up on must not
// go on paying. The message says whether the platform took the request.
func (r *Runner) timedOut(ctx context.Context, j *job, sess *apiclient.ClusterSession, last string) error {
	jobID := j.rec.Upstream.JobID
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deadlineCallTimeout)
	defer cancel()
	upstream := "it was deleted upstream"
	if err := sess.CancelJob(cctx, "", "", jobID); err != nil {
		j.log.Warn().Err(err).Msg("cannot delete the timed-out compute job upstream")
		upstream = "deleting it upstream failed, it may still run there: " + err.Error()
	}
	return fail(CodeTimeout, state.StagePoll, false, "job %s not finished after %s (SLUICE_COMPUTE_TIMEOUT)%s; %s",
		jobID, r.cfg.ComputeTimeout, last, upstream)
}

// mergeEnd completes a terminal realtime detail with the job's history
// record: the record's reading of the end wins (the realtime status can
// lag the scheduler), the realtime paths stay where the record has none.
func mergeEnd(d *apiclient.JobDetail, h *apiclient.HistoryRecord) *apiclient.JobDetail {
	out := *h.Detail()
	out.OutputPath = cmp.Or(d.OutputPath, out.OutputPath)
	out.ErrorPath = cmp.Or(d.ErrorPath, out.ErrorPath)
	out.NodeUsed = cmp.Or(d.NodeUsed, out.NodeUsed)
	out.WalltimeReq = cmp.Or(d.WalltimeReq, out.WalltimeReq)
	out.JobInitAttr = d.JobInitAttr
	if out.Reason == "" {
		out.Reason = d.Reason
	}
	return &out
}

// cancelJob deletes j's job upstream and reports whether the platform
// took the request. The job's end is then read, never assumed: a job that
// ended first keeps its own outcome. A platform without a cancel
// (compute-api.md's letter) lets the job run to its end; an error leaves
// the request to be sent again at the next poll.
func (r *Runner) cancelJob(ctx context.Context, j *job, sess *apiclient.ClusterSession) bool {
	jobID := j.rec.Upstream.JobID
	j.log.Info().Msg("cancelling upstream compute job")
	err := sess.CancelJob(ctx, "", "", jobID)
	switch {
	case err == nil:
		j.log.Info().Msg("upstream compute job deleted; waiting for the platform to show its end")
		return true
	case errors.Is(err, apiclient.ErrNotSupported):
		j.log.Warn().Err(err).Msg(LogComputeCancelUnsupported)
		return true
	case errors.Is(err, apiclient.ErrJobNotFound) || !isTransientCompute(err):
		// Ended already, or refused: its end tells the outcome.
		j.log.Warn().Err(err).Msg("the platform refused the cancel; the job keeps the outcome it shows")
		return true
	}
	j.log.Warn().Err(err).Msg("cancel request failed; sent again at the next poll")
	return false
}

// LogComputeCancelUnsupported is logged when the platform has no cancel
// operation: the compute job runs to its end.
const LogComputeCancelUnsupported = "the platform has no cancel operation for compute jobs (compute-api.md lists none): the job runs to its end"

// pollNews reports whether a poll of j's compute job brought news worth a
// write: another status, scheduler status, state or exit code, or a
// record last written a quarter of SLUICE_STATE_TTL ago (a job that runs
// for days must not outlive its record).
func (r *Runner) pollNews(j *job, status state.Status, d *apiclient.JobDetail) bool {
	u := j.rec.Upstream
	return status != j.rec.Status || d.JobStatus != u.Status || d.JobState() != u.State ||
		!equalPtr(d.ExitCode, u.ExitCode) || r.cfg.Now().Sub(j.rec.UpdatedAt) > r.cfg.StateTTL/4
}

func equalPtr[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

func statusOfPhase(p apiclient.JobPhase, cur state.Status) state.Status {
	switch p {
	case apiclient.JobRunning:
		return state.StatusRunning
	case apiclient.JobSucceeded, apiclient.JobFailed:
		return state.StatusCollecting
	}
	return cur
}

// collectCompute copies stdout, stderr and every declared output.
func (r *Runner) collectCompute(ctx context.Context, j *job, sess *apiclient.ClusterSession, d *apiclient.JobDetail) error {
	spec := j.spec.Compute
	type file struct{ name, path string }
	var files []file
	if p := cmp.Or(d.OutputPath, spec.Job.Stdout); p != "" {
		files = append(files, file{"stdout.txt", p})
	}
	if p := cmp.Or(d.ErrorPath, spec.Job.Stderr); p != "" {
		files = append(files, file{"stderr.txt", p})
	}
	used := map[string]bool{"stdout.txt": true, "stderr.txt": true}
	for i, p := range spec.Outputs {
		name := artifacts.SanitizeFileName(path.Base(p))
		if used[name] {
			name = fmt.Sprintf("%d-%s", i, name)
		}
		used[name] = true
		files = append(files, file{name, p})
	}
	for i, f := range files {
		p := f.path
		open := func(ctx context.Context) (io.ReadCloser, string, string, error) {
			body, err := sess.Download(ctx, p)
			if err != nil {
				if isTransientCompute(err) {
					err = artifacts.Transient(err)
				}
				return nil, "", "", err
			}
			return body, "", "compute:" + p, nil
		}
		if err := r.copyArtifact(ctx, j, f.name, i == len(files)-1, open, nil); err != nil {
			return err
		}
	}
	return nil
}

// inputOpener opens a compute input from S3 or HTTPS for the upload; the
// upload calls it again when it retries. Every failure to open or read
// the input, also in the middle of its bytes, is an *inputError.
func (r *Runner) inputOpener(ctx context.Context, from string) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) {
		var body io.ReadCloser
		var err error
		if strings.HasPrefix(from, "s3://") {
			var bucket, key string
			if bucket, key, err = jobspec.ParseS3URL(from); err == nil {
				body, err = r.cfg.Store.Open(ctx, bucket, key)
			}
		} else {
			body, _, err = r.cfg.Fetcher.Open(ctx, from)
		}
		if err != nil {
			return nil, &inputError{err}
		}
		return inputReader{body}, nil
	}
}

// inputError marks a failure to read an input source, as opposed to a
// failure of the upload itself: a transient one (artifacts.IsTemporary)
// redelivers the job, any other fails it with input_fetch_failed.
type inputError struct{ err error }

func (e *inputError) Error() string { return "read input: " + e.err.Error() }
func (e *inputError) Unwrap() error { return e.err }

// inputReader marks the read errors of an input's body as *inputError.
type inputReader struct{ io.ReadCloser }

// Size passes on the length the source announced (-1 when unknown): the
// chunked upload needs it before the first chunk.
func (r inputReader) Size() int64 {
	if s, ok := r.ReadCloser.(interface{ Size() int64 }); ok {
		return s.Size()
	}
	return -1
}

func (r inputReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = &inputError{err}
	}
	return n, err
}

// sourcePath is the path part of an input address, for its file name.
func sourcePath(from string) string {
	if u, err := url.Parse(from); err == nil {
		if u.Scheme == "s3" {
			return u.Host + u.Path
		}
		return u.Path
	}
	return from
}

// isTransientCompute reports whether a compute client error may pass.
func isTransientCompute(err error) bool {
	temporary, _ := backoff.Temporary(err)
	return apiclient.IsTransient(err) || temporary
}

// computeError maps a compute client error at stage: transient errors
// redeliver the job, the rest fail it.
func computeError(stage state.Stage, what string, err error) error {
	if isTransientCompute(err) {
		return transient(fmt.Errorf("%s: %w", what, err))
	}
	code := CodeUpstreamRejected
	var ee *apiclient.EnvelopeError
	switch {
	case errors.Is(err, apiclient.ErrClusterNotFound):
		code = CodeClusterNotFound
	case errors.Is(err, apiclient.ErrUnauthorized):
		code = CodeUpstreamUnauthorized
	case errors.As(err, &ee) && ee.Code != "":
		code = "compute_" + ee.Code
	}
	return fail(code, stage, true, "%s: %v", what, err)
}

// asPermanent wraps a non-transient, non-ambiguous compute submit error so
// submitError fails the job instead of retrying it.
func asPermanent(err error) error {
	if errors.Is(err, apiclient.ErrAmbiguous) {
		return err
	}
	return computeError(state.StageSubmit, "submit job", err)
}
