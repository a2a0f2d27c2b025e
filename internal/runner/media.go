package runner

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// submitTimeout bounds one submit call, and the checkpoint after it has
// a budget of the same length of its own (Config.SubmitTimeout). Both run
// on a context detached from shutdown: a stop must not cut the window
// between a paid submit and the record of its task id.
const submitTimeout = 2 * time.Minute

// deadlineCallTimeout bounds each call made for a task at its deadline
// (the query, the cancel): an upstream that never answers must not hold the
// job past it.
const deadlineCallTimeout = 10 * time.Second

// LogSubmittingAgain is the message of the warning logged, with the job's
// id, each time a job is submitted (or streamed) again because the last
// worker stopped inside the submit window: the only second submission
// sluice makes on its own. The reliability harness counts these lines.
const LogSubmittingAgain = "previous worker stopped between submit and checkpoint; submitting again"

// LogSubmitSuperseded is logged, with the task's or job's upstream id, by
// a delivery whose submit was sent inside the same submit window as
// another delivery's that was recorded first: its task runs on upstream
// unrecorded, and the job goes on with the recorded one.
const LogSubmitSuperseded = "submitted, but another delivery's submit was recorded first; this one is left unrecorded upstream"

// LogStreamSuperseded is logged by a delivery whose speech stream opened
// after another delivery of the job claimed a submit of its own: the
// stream is closed unread, and only the other delivery stores its audio.
const LogStreamSuperseded = "speech stream opened, but another delivery claimed the job's submit since; closing it unread"

// runMedia runs a video or speech job up to its wait: it submits the task
// unless the record says it was submitted, and reports wait when the job
// must now wait for its task (waitTask) to collect its results. Streamed
// and synchronous speech, which need no wait, run to their end here.
func (r *Runner) runMedia(ctx context.Context, j *job) (wait bool, err error) {
	if r.cfg.Media == nil {
		return false, fail(CodeUpstreamUnavailable, state.StageSubmit, true, "the media API is not configured (SLUICE_MEDIA_BASE_URL is empty)")
	}
	mode := jobspec.ModeAsync
	if j.kind == "speech" {
		mode = j.spec.Speech.EffectiveMode()
	}
	rec := j.rec

	switch {
	case mode == jobspec.ModeStream && !submittedOrLater(rec.Status):
		return false, r.streamSpeech(ctx, j)
	case mode == jobspec.ModeStream && len(rec.Artifacts) > 0:
		// The last worker stored the audio and stopped before the end.
		return false, nil
	case mode == jobspec.ModeStream:
		return false, fail(CodeUpstreamFailed, state.StageCollect, true,
			"the worker reading the speech stream stopped before the audio was stored; a stream cannot be resumed without paying again")
	case mode == jobspec.ModeSync && submittedOrLater(rec.Status) && len(rec.Results) > 0:
		// Synthesized before the last worker stopped: collect, never submit again.
		return false, r.collectMedia(ctx, j, rec.Results)
	case mode == jobspec.ModeSync && submittedOrLater(rec.Status):
		return false, fail(CodeUpstreamFailed, state.StagePoll, false,
			"synchronous speech ended %q without result addresses before the last worker stopped", rec.Upstream.Status)
	case mode == jobspec.ModeSync:
		task, err := r.submitMedia(ctx, j, func(ctx context.Context) (*apiclient.Task, error) {
			return r.cfg.Media.SubmitSpeechSync(ctx, j.spec.Speech.Request())
		})
		if err != nil {
			return false, err
		}
		// Synthesized in the answer: nothing runs upstream any more.
		r.releaseQuota(j)
		if task.Output.TaskStatus != apiclient.TaskSucceeded {
			return false, taskFailure(task)
		}
		return false, r.collectMedia(ctx, j, task.Output.Results)
	case !submittedOrLater(rec.Status) && rec.Upstream.TaskID == "":
		if j.cancelled() {
			return false, errCancelled
		}
		if _, err := r.submitMedia(ctx, j, r.mediaSubmitter(j)); err != nil {
			return false, err
		}
	default:
		// Resumed: the task is upstream already (its id reached the record,
		// even if its step did not).
		r.takeQuota(j)
	}

	return true, nil
}

// collectTask ends a job whose task is terminal: it collects a succeeded
// task's results, or fails (or cancels) the job.
func (r *Runner) collectTask(ctx context.Context, j *job, task *apiclient.Task) error {
	if task.Output.TaskStatus != apiclient.TaskSucceeded {
		if task.Output.TaskStatus == apiclient.TaskCancelled {
			return errCancelled
		}
		return taskFailure(task)
	}
	return r.collectMedia(ctx, j, task.Output.Results)
}

// mediaSubmitter returns the paid call that creates j's task.
func (r *Runner) mediaSubmitter(j *job) func(context.Context) (*apiclient.Task, error) {
	if j.kind == "speech" {
		return func(ctx context.Context) (*apiclient.Task, error) {
			return r.cfg.Media.SubmitSpeechAsync(ctx, j.spec.Speech.Request())
		}
	}
	return func(ctx context.Context) (*apiclient.Task, error) {
		req, err := r.presignVideo(ctx, j.spec.Video.Request())
		if err != nil {
			return nil, err
		}
		return r.cfg.Media.SubmitVideo(ctx, req)
	}
}

// presignVideo replaces s3:// media addresses with presigned GET URLs.
func (r *Runner) presignVideo(ctx context.Context, req apiclient.VideoRequest) (apiclient.VideoRequest, error) {
	sign := func(field, u string) (string, error) {
		if !strings.HasPrefix(u, "s3://") {
			return u, nil
		}
		bucket, key, err := jobspec.ParseS3URL(u)
		if err != nil {
			return "", fail(CodeInvalidSpec, state.StageValidate, true, "%s: %v", field, err)
		}
		signed, err := r.cfg.Store.Presign(ctx, bucket, key, r.cfg.PresignTTL)
		if err != nil {
			return "", fail(CodeInputFetchFailed, state.StageSubmit, true, "%s: cannot presign s3://%s/%s: %v", field, bucket, key, err)
		}
		return signed, nil
	}
	var err error
	for i := range req.Input.Images {
		if req.Input.Images[i], err = sign(fmt.Sprintf("video.input.images[%d]", i), req.Input.Images[i]); err != nil {
			return req, err
		}
	}
	for i := range req.Input.Media {
		if req.Input.Media[i].URL, err = sign(fmt.Sprintf("video.input.media[%d].url", i), req.Input.Media[i].URL); err != nil {
			return req, err
		}
	}
	return req, nil
}

// submitMedia checkpoints "submitting", sends the paid submit and records
// the task it created. A record already at "submitting" means the last
// worker died inside that window: the submit is sent again (the one case
// where upstream may be paid twice; the record's submits counts it).
//
// The submit step ends the job's start phase (consumer.Delivery.Started):
// jobs wait for their turn at it as held messages without a goroutine, so
// a burst of thousands of jobs does not grow thousands of goroutine stacks
// inside the HTTP client's limiter.
func (r *Runner) submitMedia(ctx context.Context, j *job, submit func(context.Context) (*apiclient.Task, error)) (*apiclient.Task, error) {
	defer j.d.Started()
	if err := r.admit(ctx, j); err != nil {
		return nil, err
	}
	sctx, cancel := r.paidBudget(ctx)
	defer cancel()
	if err := r.claimSubmit(sctx, j, func(*state.Record) {}); err != nil {
		return nil, transient(err)
	}
	task, err := r.sendSubmit(sctx, j, submit)
	if err != nil {
		return nil, err
	}
	// What the paid submit returned gets a budget of its own: a submit
	// answered late must not leave its write seconds, and a redelivery
	// submitting (paying) again.
	wctx, wcancel := r.paidBudget(ctx)
	defer wcancel()
	now := r.cfg.Now().UTC()
	taskID := func(rec *state.Record) string { return rec.Upstream.TaskID }
	err = r.writeRetried(wctx, j, submitWindow(task.Output.TaskID, taskID), state.StatusSubmitted, set(func(rec *state.Record) {
		rec.Upstream.TaskID = task.Output.TaskID
		rec.Upstream.RequestID = task.RequestID
		rec.Upstream.Status = string(task.Output.TaskStatus)
		rec.Upstream.SubmitTime = task.Output.SubmitTime
		rec.SubmittedAt = &now
		if task.Output.TaskStatus.Terminal() {
			rec.Upstream.EndTime = task.Output.EndTime
			rec.Usage = task.Usage
			if len(task.Output.Results) > 0 && task.Output.TaskStatus == apiclient.TaskSucceeded {
				rec.Results = task.Output.Results
			}
		}
	}))
	if errors.Is(err, errSuperseded) {
		j.log.Warn().Str("task_id", task.Output.TaskID).Msg(LogSubmitSuperseded)
		return nil, err
	}
	if err != nil {
		j.log.Error().Err(err).Str("task_id", task.Output.TaskID).Msg("task submitted but its id could not be recorded")
		return nil, transient(err)
	}
	j.log = j.log.With().Str("task_id", task.Output.TaskID).Str("request_id", task.RequestID).Logger()
	j.log.Info().Msg("task submitted")
	r.publishProgress(ctx, j, state.StatusSubmitted)
	return task, nil
}

// refusedInputRetries bounds the submits sent again, inside one submit
// window, after upstream refused one because it could not fetch an s3://
// input that sluice's store serves when sluice looks: the store was away
// a moment ago (an outage ending between upstream's fetch and sluice's
// look), and nothing was created upstream. refusedInputBackoff spaces
// them: 1 s, then 1 to 2 s.
const refusedInputRetries = 2

var refusedInputBackoff = backoff.Exponential{Min: time.Second, Max: 4 * time.Second}

// sendSubmit sends the paid submit of a job whose submit is claimed, and
// classifies its failure (submitError). A submit that upstream refused
// because it could not fetch one of the job's s3:// inputs is judged by
// reading that input from sluice's store at once: when the store is away,
// the job waits for it (redelivered, nothing was created); when the store
// serves it, the submit is sent again, at most refusedInputRetries times,
// before the job fails with upstream's answer; when the object is gone,
// the job fails with upstream's answer.
func (r *Runner) sendSubmit(ctx context.Context, j *job, submit func(context.Context) (*apiclient.Task, error)) (*apiclient.Task, error) {
	var task *apiclient.Task
	done, err := r.retry(ctx, backoff.Retry{Spacing: refusedInputBackoff}, func(ctx context.Context, attempt int) (bool, error) {
		var err error
		if task, err = submit(ctx); err == nil {
			return true, nil
		}
		ref := r.inputRefusal(ctx, j, err)
		switch {
		case ref == nil:
			return true, r.submitError(ctx, j, err)
		case ref.probe != nil && artifacts.IsTemporary(ref.probe):
			return true, r.backOutSubmit(ctx, j, err)
		case ref.probe != nil:
			return true, r.submitError(ctx, j, err)
		case attempt >= refusedInputRetries:
			return true, r.submitError(ctx, j, fmt.Errorf("%w (refused %d times while sluice's store served the object: upstream cannot reach its presigned address, whose host is SLUICE_S3_ENDPOINT's)", err, attempt+1))
		}
		j.log.Warn().Str("field", ref.field).Int("refused", attempt+1).Str("upstream", ref.upstream).
			Msg("upstream could not fetch an input that sluice's store serves; nothing was created, submitting again")
		return false, err
	})
	switch {
	case !done:
		return nil, r.backOutSubmit(ctx, j, err)
	case err != nil:
		return nil, err
	}
	return task, nil
}

// submitError classifies a failed submit. Nothing was created upstream on a
// transient error, so the job backs out of its submit; a refused or
// ambiguous submit fails the job without a second try.
func (r *Runner) submitError(ctx context.Context, j *job, err error) error {
	var f *failure
	switch {
	case errors.As(err, &f):
		return f
	case errors.Is(err, apiclient.ErrQuotaExhausted):
		return r.quotaExhausted(ctx, j, err)
	case errors.Is(err, apiclient.ErrConcurrencyConflict):
		return r.concurrencyConflict(ctx, j, err)
	case errors.Is(err, apiclient.ErrAmbiguous):
		j.unseenTask = true
		return fail(CodeSubmitAmbiguous, state.StageSubmit, true,
			"upstream may or may not have created a task; sluice does not submit again on its own: %v", err)
	case apiclient.IsPermanent(err):
		code := CodeUpstreamRejected
		var ae *apiclient.APIError
		if errors.Is(err, apiclient.ErrUnauthorized) {
			code = CodeUpstreamUnauthorized
		} else if errors.As(err, &ae) && ae.Code != "" {
			code = ae.Code
		}
		return fail(code, state.StageSubmit, true, "%v", err)
	}
	return r.backOutSubmit(ctx, j, err)
}

// backOutSubmit hands back a job whose submit created nothing upstream:
// its record goes back to "received" and it is redelivered with backoff.
func (r *Runner) backOutSubmit(ctx context.Context, j *job, err error) error {
	if cerr := r.write(ctx, j, live, state.StatusReceived, set(func(rec *state.Record) { rec.Submits-- })); cerr != nil {
		j.log.Warn().Err(cerr).Msg("cannot reset the submit checkpoint")
	}
	return transient(fmt.Errorf("submit: %w", err))
}

// quotaExhausted handles a submit that upstream answered with an exhausted
// quota (HTTP 433: one run per model per day in that account): nothing was
// created, so the job backs out of its submit and is redelivered after
// QuotaRetry, the spacing doubling up to an hour, and fails
// upstream_quota_exhausted with upstream's message once QuotaWait has
// passed since its first 433 (the record's QuotaSince). The back-out
// records the wait in the job's last error and counts it in QuotaWaits, so
// that these redeliveries do not count against MaxDeliver. The job holds
// no fleet quota lease meanwhile: it is back at "received" (settleQuota).
func (r *Runner) quotaExhausted(ctx context.Context, j *job, err error) error {
	msg := err.Error()
	if ae, ok := errors.AsType[*apiclient.APIError](err); ok && ae.Message != "" {
		msg = ae.Message
	}
	rt := &retry{err: fmt.Errorf("upstream quota exhausted (HTTP %d): %s", apiclient.StatusQuotaExhausted, msg),
		step: state.StatusSubmitting, code: CodeQuotaExhausted}
	note := r.stepError(j, rt)
	// The bound counts from the job's first 433 (QuotaSince), which a 429
	// or 5xx in between does not move as it moves the last error's Since.
	since := note.Since
	if qs := j.rec.QuotaSince; !qs.IsZero() && qs.Before(since) {
		since = qs
	}
	waited := r.cfg.Now().Sub(since)
	if waited >= r.cfg.QuotaWait {
		return fail(CodeQuotaExhausted, state.StageSubmit, true,
			"upstream's quota stayed exhausted for %s (SLUICE_MEDIA_QUOTA_WAIT=%s): %s", waited.Round(time.Second), r.cfg.QuotaWait, msg)
	}
	spacing := backoff.Exponential{Min: r.cfg.QuotaRetry, Max: max(r.cfg.QuotaRetry, time.Hour)}
	rt.delay = min(spacing.Delay(j.rec.QuotaWaits), r.cfg.QuotaWait-waited)
	if cerr := r.write(ctx, j, live, state.StatusReceived, set(func(rec *state.Record) {
		rec.Submits--
		rec.QuotaWaits++
		rec.LastError = note
		if rec.QuotaSince.IsZero() {
			rec.QuotaSince = since
		}
	})); cerr != nil {
		j.log.Warn().Err(cerr).Msg("cannot reset the submit checkpoint")
	}
	j.log.Warn().Str("upstream", msg).Dur("retry_in", rt.delay).Time("since", since).
		Msg("upstream's quota is exhausted; nothing was created, submitting again later")
	return rt
}

// conflictRetry spaces the redeliveries of a job whose submit upstream
// refused for too many tasks at once: a place frees as soon as one of the
// account's tasks ends, so the job comes back within seconds, jittered so
// that the jobs refused by one over-commit do not come back together, and
// spaced further at each conflict so that a fleet without a limit of its
// own slows down too.
var conflictRetry = backoff.Exponential{Min: time.Second, Max: 15 * time.Second}

// conflictDelay is the redelivery delay of a job after waits earlier
// concurrency conflicts (conflictRetry): 1 to 2 s after its first, the
// ceiling doubling up to 15 s. The first is jittered too: a ceiling of
// Min would bring a burst's refused jobs back at one instant.
func conflictDelay(waits int) time.Duration { return conflictRetry.Delay(waits + 1) }

// concurrencyConflict handles a submit that upstream answered with a
// concurrency conflict (HTTP 433, code 10007: too many tasks at once):
// nothing was created, so the job backs out of its submit, as for an
// exhausted quota, and is redelivered after conflictRetry. The fleet's
// quota hears of it and lowers its effective limit (quota.Fleet.Conflict).
// The wait counts in ConflictWaits, neither against MaxDeliver (a fleet
// configured above the account's limit must not dead-letter its jobs)
// nor against the quota's QuotaWait: the limit frees by itself.
func (r *Runner) concurrencyConflict(ctx context.Context, j *job, err error) error {
	r.cfg.Quota.Conflict(j.kind, j.id)
	rt := &retry{err: fmt.Errorf("upstream refused the submit for too many tasks at once: %w", err),
		step: state.StatusSubmitting, code: CodeConcurrencyConflict}
	rt.delay = conflictDelay(j.rec.ConflictWaits)
	note := r.stepError(j, rt)
	if cerr := r.write(ctx, j, live, state.StatusReceived, set(func(rec *state.Record) {
		rec.Submits--
		rec.ConflictWaits++
		rec.LastError = note
	})); cerr != nil {
		j.log.Warn().Err(cerr).Msg("cannot reset the submit checkpoint")
	}
	return rt
}

// inputRefusal is a submit refused by upstream on one of the job's s3://
// inputs (sluice's own store), and what sluice saw reading that input
// right after.
type inputRefusal struct {
	field    string
	upstream string // upstream's message
	probe    error  // nil: the store serves the object
}

// inputRefusal reports a submit refused with a parameter error naming an
// s3:// input of the job, reading the input's first byte from the store to
// tell an input that is gone from a store that is away or was a moment
// ago. It returns nil for any other error.
func (r *Runner) inputRefusal(ctx context.Context, j *job, err error) *inputRefusal {
	var ae *apiclient.APIError
	if j.kind != "video" || !apiclient.IsPermanent(err) || !errors.As(err, &ae) || ae.Param == "" {
		return nil
	}
	for _, in := range j.spec.Video.Inputs() {
		if in.Field != "video."+ae.Param || !strings.HasPrefix(in.URL, "s3://") {
			continue
		}
		src, err := r.openInput(ctx, in.URL)
		if err == nil {
			_, err = src.ReadAt(make([]byte, 1), 0)
		}
		return &inputRefusal{field: in.Field, upstream: ae.Message, probe: err}
	}
	return nil
}

// observeTask records what a poll saw: the first "running" becomes a
// checkpoint and a running event; a terminal task's times and usage are
// kept for the job's next write, which the terminal event is made from.
func (r *Runner) observeTask(ctx context.Context, j *job, t *apiclient.Task) error {
	st := t.Output.TaskStatus
	switch {
	case st == apiclient.TaskRunning && j.rec.Status != state.StatusRunning:
		if err := r.write(ctx, j, live, state.StatusRunning, set(func(rec *state.Record) { rec.Upstream.Status = string(st) })); err != nil {
			return transient(err)
		}
		r.publishProgress(ctx, j, state.StatusRunning)
	case st.Terminal():
		// Recorded with the job's next write (the first large artifact's
		// or the terminal record): a job that stops before it asks
		// upstream again.
		end, submit, usage := t.Output.EndTime, t.Output.SubmitTime, t.Usage
		j.unrecorded = func(rec *state.Record) {
			rec.Upstream.Status = string(st)
			rec.Upstream.EndTime = end
			rec.Upstream.SubmitTime = cmp.Or(submit, rec.Upstream.SubmitTime)
			rec.Usage = usage
		}
	}
	return nil
}

// cancelTask asks upstream to cancel j's task; done reports that the
// wait is over: the task is cancelled (errCancelled), or ended first and
// keeps its own outcome (the task). A cancel answered with the task still
// pending or running did not cancel it: the job ends cancelled only once
// upstream says so (docs/lifecycle.md#cancelling), so it polls on and asks again
// at its next poll (see waiter.handle).
func (r *Runner) cancelTask(ctx context.Context, j *job) (task *apiclient.Task, err error, done bool) {
	taskID := j.rec.Upstream.TaskID
	j.log.Info().Msg("cancelling upstream task")
	t, err := r.cfg.Media.CancelTask(ctx, taskID)
	if errors.Is(err, apiclient.ErrTaskTerminal) {
		t, err = r.cfg.Media.GetTask(ctx, taskID)
	}
	if errors.Is(err, apiclient.ErrTaskNotFound) {
		// Asking again would get the same answer at each redelivery.
		return nil, taskForgotten(taskID), true
	}
	if err != nil {
		return nil, transient(fmt.Errorf("cancel task: %w", err)), true
	}
	if err := r.observeTask(ctx, j, t); err != nil {
		return nil, err, true
	}
	switch st := t.Output.TaskStatus; {
	case st == apiclient.TaskCancelled:
		return nil, errCancelled, true
	case !st.Terminal():
		j.log.Warn().Str("upstream_status", string(st)).
			Msg("upstream answered the cancel with the task not cancelled; polling on and asking again")
		return nil, nil, false
	}
	return t, nil, true
}

// NoteSubmitMayHaveHappened is the note (state.Record.Note, the event's
// note) of a media job cancelled inside its submit window with no task id
// recorded: a worker that stopped there may have created a task nobody
// polls, and a media task cannot be looked up by any name sluice gave it.
const NoteSubmitMayHaveHappened = "submit_may_have_happened"

// unrecordedSubmit reports whether media job rec is inside its submit
// window with no task id recorded (NoteSubmitMayHaveHappened).
func unrecordedSubmit(rec *state.Record) bool {
	return (rec.Kind == "video" || rec.Kind == "speech") && rec.Status == state.StatusSubmitting && rec.Upstream.TaskID == ""
}

// taskForgotten is the failure of a job whose task upstream answers 404
// for, to a poll or to a cancel: nothing of it can be learnt any more.
func taskForgotten(taskID string) error {
	return fail(CodeUpstreamFailed, state.StagePoll, false, "upstream no longer knows task %s", taskID)
}

// taskFailure is the failure of an upstream task that ended failed.
func taskFailure(t *apiclient.Task) error {
	code, msg := CodeUpstreamFailed, "upstream task failed"
	if t.Output.ErrorCode != nil && *t.Output.ErrorCode != "" {
		code = *t.Output.ErrorCode
	}
	if t.Output.ErrorMessage != nil && *t.Output.ErrorMessage != "" {
		msg = *t.Output.ErrorMessage
	}
	if !t.Output.TaskStatus.Terminal() {
		msg = fmt.Sprintf("unexpected task status %q", t.Output.TaskStatus)
	}
	return fail(code, state.StagePoll, false, "%s", msg)
}

// collectMedia copies every result address to S3 as result-<n><ext>.
func (r *Runner) collectMedia(ctx context.Context, j *job, results []string) error {
	if len(results) == 0 {
		return fail(CodeUpstreamFailed, state.StageCollect, true, "upstream reported success without result addresses")
	}
	copying, stop := r.showCollecting(ctx, j)
	defer stop()
	ext := ".mp4"
	if j.kind == "speech" {
		ext = ".mp3"
	}
	for i, u := range results {
		name := fmt.Sprintf("result-%d%s", i, resultExt(u, ext))
		if err := r.copyArtifact(ctx, j, name, i == len(results)-1, r.cfg.Fetcher.Opener(u), copying); err != nil {
			return err
		}
	}
	return nil
}

// collectingAfter is how long a job copies its artifacts before its record
// shows "collecting" (showCollecting).
const collectingAfter = time.Second

// showCollecting writes j's record as "collecting" once its copies have
// run for collectingAfter: copying starts that clock as the first copy
// takes its slot (a job queued for a copy slot is not copying yet), and
// stop ends it (and waits for the write if it started). Quick copies so
// cost no write of their own: what they stored is recorded with the
// terminal record. Only a reader watching a long copy needs the status,
// and nothing on resume does: a job "submitted", "running" or
// "collecting" polls its task again and copies what its record does not
// list. The write starts from the record as j holds it then and runs
// while j copies; when j has not written meanwhile, stop hands j the
// written record, so that j's next write does not conflict with it (a
// write of j's meanwhile makes one of the two re-read the record, by
// compare-and-set, so neither is lost).
func (r *Runner) showCollecting(ctx context.Context, j *job) (copying, stop func()) {
	if j.rec.Status == state.StatusCollecting {
		return nil, func() {}
	}
	var (
		t       *time.Timer
		last    *state.Record
		written *state.Record
		done    = make(chan struct{})
	)
	copying = func() {
		if t != nil {
			return
		}
		// What j's own writes carry besides (pending artifacts, a first
		// write) stays theirs: this one may run beside them. Like them,
		// it clears a last error of the step the job has left
		// (keepLastError); a copy's own error is at "collecting" and stays.
		v := view{id: j.id, rec: j.rec, attempt: j.attempt, unrecorded: j.unrecorded}
		last = j.rec
		log := j.log
		t = time.AfterFunc(collectingAfter, func() {
			defer close(done)
			rec, err := r.put(ctx, v, beforeCollecting, state.StatusCollecting, set(func(*state.Record) {}))
			if err != nil {
				log.Warn().Err(err).Msg("cannot record that the job is collecting; its copies go on")
				return
			}
			written = rec
		})
	}
	return copying, func() {
		if t == nil || t.Stop() {
			return
		}
		<-done
		if written != nil && j.rec == last {
			j.rec = written
		}
	}
}

// resultExt is the extension of a result address's path, or def.
func resultExt(u, def string) string {
	p := u
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		p = p[:i]
	}
	ext := strings.ToLower(path.Ext(p))
	if len(ext) < 2 || len(ext) > 6 || strings.ContainsAny(ext, "/:") {
		return def
	}
	for _, c := range ext[1:] {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return def
		}
	}
	return ext
}

// streamSpeech opens the SSE stream and writes the decoded audio as one
// object. A stream cannot be resumed: any break after it opened fails the
// job (a second stream would be paid again).
func (r *Runner) streamSpeech(ctx context.Context, j *job) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.TaskTimeout)
	defer cancel()
	if err := r.probeStore(ctx, j); err != nil {
		return err
	}
	if err := r.admit(ctx, j); err != nil {
		return err
	}
	if err := r.claimSubmit(sctx, j, func(*state.Record) {}); err != nil {
		return transient(err)
	}
	claim := j.rec.Submits
	stream, err := r.cfg.Media.StreamSpeech(sctx, j.spec.Speech.Request())
	if err != nil {
		return r.submitError(sctx, j, err)
	}
	defer stream.Close()
	now := r.cfg.Now().UTC()
	err = r.writeRetried(sctx, j, lastClaim(claim), state.StatusCollecting, set(func(rec *state.Record) {
		rec.Upstream.RequestID = stream.RequestID()
		rec.Upstream.Status = "streaming"
		rec.SubmittedAt = &now
	}))
	if errors.Is(err, errSuperseded) {
		j.log.Warn().Str("request_id", stream.RequestID()).Msg(LogStreamSuperseded)
		return err
	}
	if err != nil {
		return transient(err)
	}
	// Reading the stream may take minutes: let other jobs start meanwhile.
	j.d.Started()
	// The stream is read under sctx, detached from a stop so that it may
	// finish inside the stop's grace; the stop's end (ctx) closes it, and
	// the stream's own stall check gives it up sooner when it goes silent.
	defer context.AfterFunc(ctx, func() { _ = stream.Close() })()
	// Read the first frame before choosing the object's name and type.
	br := bufio.NewReaderSize(stream, 64<<10)
	if _, err := br.Peek(1); err != nil && !errors.Is(err, bufio.ErrBufferFull) {
		return streamFailure(err)
	}
	ctype := cmp.Or(stream.ContentType(), "audio/mpeg")
	name := "result-0" + audioExt(ctype)
	key, err := r.cfg.Store.Key(outputPrefix(j.spec), j.kind, j.id, name)
	if err != nil {
		return fail(CodeInvalidSpec, state.StageCollect, true, "%v", err)
	}
	if err := r.acquireCopy(ctx, j); err != nil {
		return err
	}
	art, err := r.cfg.Store.Put(sctx, key, ctype, "sse", br, r.cfg.MaxArtifactBytes)
	r.releaseCopy()
	if err != nil {
		return streamFailure(err)
	}
	r.cfg.Metrics.ArtifactBytes(j.kind, art.Size)
	return r.writeRetried(sctx, j, lastClaim(claim), state.StatusCollecting, set(func(rec *state.Record) {
		rec.Upstream.Status = string(apiclient.TaskSucceeded)
		rec.Usage = stream.Usage()
		rec.Artifacts = appendArtifact(rec.Artifacts, art)
	}))
}

// probeStore checks that S3 answers before a paid stream is opened: the
// stream goes straight into S3 and cannot be read twice, so an S3 outage
// must delay the job rather than waste the stream.
func (r *Runner) probeStore(ctx context.Context, j *job) error {
	key, err := r.cfg.Store.Key(outputPrefix(j.spec), j.kind, j.id, "result-0.mp3")
	if err != nil {
		return fail(CodeInvalidSpec, state.StageCollect, true, "%v", err)
	}
	if _, _, err := r.cfg.Store.Stat(ctx, key); err != nil && (artifacts.IsTemporary(err) || artifacts.IsStoreRefusal(err)) {
		return transient(fmt.Errorf("S3 does not answer or refuses; the speech stream waits for it: %w", err))
	}
	return nil
}

// streamFailure maps a broken stream or upload to the job's failure.
func streamFailure(err error) error {
	var fe *apiclient.FrameError
	if errors.As(err, &fe) {
		return fail(cmp.Or(fe.Code, CodeUpstreamFailed), state.StagePoll, false, "%v", err)
	}
	if f := artifactFailure(err); f != nil {
		return f
	}
	return fail(CodeUpstreamFailed, state.StageCollect, true, "speech stream broke and cannot be resumed without paying again: %v", err)
}

// audioExt maps an audio media type to a file extension.
func audioExt(ctype string) string {
	switch strings.ToLower(strings.TrimSpace(strings.Split(ctype, ";")[0])) {
	case "audio/wav", "audio/x-wav", "audio/wave":
		return ".wav"
	case "audio/pcm", "audio/l16":
		return ".pcm"
	case "audio/ogg", "audio/opus":
		return ".ogg"
	case "audio/aac":
		return ".aac"
	case "audio/flac":
		return ".flac"
	}
	return ".mp3"
}
