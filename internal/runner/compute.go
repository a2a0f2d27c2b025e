package runner

import (
	"cmp"
	"context"
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
// then collect stdout, stderr and the declared outputs. A compute job can
// only be cancelled before it is submitted: the platform has no cancel
// operation.
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
	if err := r.collectCompute(ctx, j, sess, detail); err != nil {
		return err
	}
	if phase == apiclient.JobFailed {
		exit := "unknown"
		if detail.ExitCode != nil {
			exit = *detail.ExitCode
		}
		return fail(CodeExitStatus, state.StagePoll, false, "job %s ended %s/%s with exit code %s",
			detail.JobID, detail.JobStatus, detail.JobState(), exit)
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
		if !slices.Contains(names, queue) {
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
	if err := r.claimSubmit(sctx, j, func(rec *state.Record) {
		rec.Upstream.ClusterID = sess.ClusterID()
	}); err != nil {
		return transient(err)
	}
	jobID, err := sess.SubmitJob(sctx, spec.Template.Type, spec.Template.Name, req)
	if err != nil {
		if errors.Is(err, apiclient.ErrAmbiguous) || !isTransientCompute(err) {
			return r.submitError(sctx, j, asPermanent(err))
		}
		return r.submitError(sctx, j, err)
	}
	now := r.cfg.Now().UTC()
	upstreamID := func(rec *state.Record) string { return rec.Upstream.JobID }
	err = r.recordSubmitted(sctx, j, jobID, upstreamID, func(rec *state.Record) {
		rec.Upstream.ClusterID = sess.ClusterID()
		rec.Upstream.JobID = jobID
		rec.SubmittedAt = &now
	})
	if errors.Is(err, errSuperseded) {
		j.log.Warn().Str("upstream_job_id", jobID).Msg(LogSubmitSuperseded)
		return err
	}
	if err != nil {
		j.log.Error().Err(err).Str("upstream_job_id", jobID).Msg("job submitted but its id could not be recorded")
		return transient(err)
	}
	j.log.Info().Str("upstream_job_id", jobID).Msg("compute job submitted")
	r.publishProgress(ctx, j, state.StatusSubmitted)
	return nil
}

// notFoundPolls is how many not-found answers in a row a job the platform
// has not shown yet gets before it counts as vanished: right after a
// submit the platform may lag (apiclient.WaitJobOptions.NotFoundPolls).
const notFoundPolls = 3

// waitJob polls the job every ComputePoll until it ends.
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
	// one); misses counts the not-found answers in a row until then.
	var last apiclient.JobPhase
	misses := 0
	if j.rec.Status == state.StatusRunning {
		last = apiclient.JobRunning
	}
	if j.rec.Status == state.StatusCollecting {
		// Finished before a restart: one query gives the detail again.
		last = apiclient.JobRunning
	}
	wait := time.Duration(0)
	for {
		select {
		case <-j.d.Stopping():
			return nil, "", errStopping
		case <-ctx.Done():
			return nil, "", errStopping
		case <-time.After(wait):
		}
		wait = r.cfg.ComputePoll
		d, err := sess.Job(ctx, jobID)
		notFound := errors.Is(err, apiclient.ErrJobNotFound)
		if notFound && last == "" {
			misses++
		}
		switch {
		case notFound && last != "":
			return nil, "", fail(CodeJobVanished, state.StagePoll, false, "job %s disappeared from the platform: it was last seen %s", jobID, last)
		case notFound && misses >= notFoundPolls:
			return nil, "", fail(CodeJobVanished, state.StagePoll, false, "job %s, accepted at submit, is unknown to the platform (not found %d times in a row)", jobID, misses)
		case err != nil && r.cfg.Now().After(deadline):
			return nil, "", fail(CodeTimeout, state.StagePoll, false, "job %s not finished after %s (SLUICE_COMPUTE_TIMEOUT): %v", jobID, r.cfg.ComputeTimeout, err)
		case err != nil:
			j.log.Warn().Err(err).Msg("job query failed")
			continue
		}
		misses = 0
		phase := apiclient.JobPhaseOf(d)
		exit, status := d.ExitCode, statusOfPhase(phase, j.rec.Status)
		if r.pollNews(j, status, d) {
			if err := r.checkpoint(ctx, j, status, func(rec *state.Record) {
				rec.Upstream.Status = d.JobStatus
				rec.Upstream.State = d.JobState()
				rec.Upstream.ExitCode = exit
			}); err != nil {
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
			return nil, "", fail(CodeTimeout, state.StagePoll, false, "job %s not finished after %s (SLUICE_COMPUTE_TIMEOUT)", jobID, r.cfg.ComputeTimeout)
		}
	}
}

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
