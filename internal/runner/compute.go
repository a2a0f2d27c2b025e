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
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// runCompute runs a compute job: check the queue, upload inputs, submit
// (unless the record says it was submitted), poll the job until it ends,
// then collect stdout, stderr and the declared outputs. A cancel before
// the submit ends the job without it; after the submit the job is deleted
// upstream and ends cancelled once the platform shows it so (waitJob).
func (r *Runner) runCompute(ctx context.Context, j *job) error {
	sess, err := r.openSession(ctx, j, j.spec.Compute.Cluster, "compute.cluster", "open cluster session")
	if err != nil {
		return r.settleFailed(ctx, j, err)
	}
	if !submittedOrLater(j.rec.Status) {
		if err := r.submitCompute(ctx, j, sess); err != nil {
			return r.settleFailed(ctx, j, err)
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

// openSession opens the session of the cluster (region) j runs on: the
// one its record names, else the spec's (field, for errors), else the
// default.
func (r *Runner) openSession(ctx context.Context, j *job, specCluster, field, what string) (*apiclient.ClusterSession, error) {
	if r.cfg.Compute == nil {
		return nil, fail(CodeUpstreamUnavailable, state.StageSubmit, true, "the compute platform is not configured (SLUICE_COMPUTE_BASE_URL is empty)")
	}
	sess, err := r.cfg.Compute.Cluster(ctx, cmp.Or(j.rec.Upstream.ClusterID, specCluster))
	if err != nil {
		if specCluster != "" {
			what = field + ": " + what
		}
		return nil, computeError(state.StageSubmit, what, err)
	}
	return sess, nil
}

// submitCompute checks the queue and the job's shape against it, uploads
// the inputs and sends the job: a job its queue cannot take fails before
// anything is uploaded.
func (r *Runner) submitCompute(ctx context.Context, j *job, sess *apiclient.ClusterSession) error {
	spec := j.spec.Compute
	schedID, err := sess.SchedulerID(ctx)
	if err != nil {
		return computeError(state.StageSubmit, "query cluster", err)
	}
	if err := r.checkQueue(ctx, j, sess, schedID); err != nil {
		return err
	}
	req := spec.Request(jobspec.ComputeTarget{JobID: j.id, SchedulerID: schedID, ClusterID: sess.ClusterID()})
	if err := r.checkLimits(ctx, j, sess, schedID, req.MapAppJobInfo); err != nil {
		return err
	}
	if err := r.uploadInputs(ctx, j, sess, "compute", spec.Inputs); err != nil {
		return err
	}
	if j.cancelled() {
		return errCancelled
	}
	if err := r.admit(ctx, j); err != nil {
		return err
	}

	// The platform job carries the job's identity, by which a lost
	// answer's job is found (settleUnrecorded).
	req.MapAppJobInfo[apiclient.KeyJobName] = platformJobName(j)

	sctx, cancel := r.paidBudget(ctx)
	defer cancel()
	// A record at "submitting" is a submit whose answer nobody recorded:
	// the platform may hold that job, and a second one would be paid twice.
	if j.rec.Status == state.StatusSubmitting {
		id, err := r.settleUnrecorded(sctx, j, sess, adoptOne)
		var f *failure
		switch {
		case errors.As(err, &f):
			return f
		case err != nil:
			return transient(fmt.Errorf("look for the job an earlier submit created: %w", err))
		case id != "":
			j.log.Warn().Str("upstream_job_id", id).Msg("found the job an earlier submit created; adopting it")
			return r.adoptSubmitted(sctx, j, sess, id)
		}
	}
	if err := checkPlatformJobName(j); err != nil {
		return err
	}
	if err := r.claimSubmit(sctx, j, func(rec *state.Record) {
		rec.Upstream.ClusterID = sess.ClusterID()
		rec.Upstream.JobName = platformJobName(j)
	}); err != nil {
		return transient(err)
	}
	jobID, err := sess.SubmitJob(sctx, spec.Template.Type, spec.Template.Name, req)
	wctx, wcancel := r.paidBudget(ctx)
	defer wcancel()
	if errors.Is(err, apiclient.ErrAmbiguous) {
		id, ferr := r.findLost(wctx, j, sess)
		if id != "" {
			j.log.Warn().Err(err).Str("upstream_job_id", id).Msg("submit answer lost; found the job it created")
			jobID, err = id, nil
		} else if ferr != nil {
			err = fmt.Errorf("%w (and looking for the job failed: %v)", err, ferr)
		}
	}
	if err != nil {
		if errors.Is(err, apiclient.ErrMinGRES) {
			return r.submitError(wctx, j, minGRESFailure(&spec.Job, req.MapAppJobInfo, err))
		}
		if errors.Is(err, apiclient.ErrAmbiguous) || !isTransientCompute(err) {
			return r.submitError(wctx, j, asPermanent(err))
		}
		return r.submitError(wctx, j, err)
	}
	return r.adoptSubmitted(wctx, j, sess, jobID)
}

// paidBudget is the budget of one side of a paid submit or create
// (media, compute, container): the claim and the call, then, a budget of
// its own, the lookup and the write of what it returned, each
// Config.SubmitTimeout. Both are detached from shutdown: a stop must not
// cut the window between a paid call and the record of what it made, and
// a call answered late must not leave that record seconds (a redelivery
// would pay again, or the job end submit_ambiguous).
func (r *Runner) paidBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), r.cfg.SubmitTimeout)
}

// checkQueue checks that the spec's queue, if it names one, is available
// to the platform user.
func (r *Runner) checkQueue(ctx context.Context, j *job, sess *apiclient.ClusterSession, schedID string) error {
	spec := j.spec.Compute
	queue := cmp.Or(spec.Job.Extra["GAP_QUEUE"], spec.Job.Queue)
	if queue == "" {
		return nil
	}
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
		// The platform answers no list for some users and regions: that
		// refuses nothing, the submit is the judge.
		j.log.Warn().Str("queue", queue).Msg("the platform lists no queues for the user; submitting to the queue unchecked")
	case !slices.Contains(names, queue):
		return fail(CodeQueueUnavailable, state.StageSubmit, true,
			"compute.job.queue: queue %q is not available to user %s (available: %s)", queue, sess.UserName(), strings.Join(names, ", "))
	}
	return nil
}

// uploadInputs uploads a compute or container job's inputs (section is
// the spec's section, for the field names in errors). A later delivery
// keeps what an earlier one that uploaded them all left whole
// (uploadedBefore, heldInput), and overwrites anything else there,
// whatever cover says.
func (r *Runner) uploadInputs(ctx context.Context, j *job, sess *apiclient.ClusterSession, section string, inputs []jobspec.ComputeInput) error {
	listed := map[string][]apiclient.RemoteFile{}
	for i, in := range inputs {
		if j.stopping() {
			return errStopping
		}
		if j.cancelled() {
			return errCancelled
		}
		name, open := path.Base(sourcePath(in.From)), r.inputOpener(ctx, in.From)
		if uploadedBefore(j.rec) && heldInput(ctx, sess, listed, in.To, name, open) {
			j.log.Debug().Str("to", in.To).Str("file", name).Msg("input already on the platform with its size; not uploaded again")
			continue
		}
		cover := in.Cover || j.rec.Attempts > 1
		err := r.uploadHeld(ctx, j, func() error { return sess.Upload(ctx, in.To, name, cover, open) })
		if err == nil {
			continue
		}
		field := fmt.Sprintf("%s.inputs[%d]", section, i)
		var f *failure
		var ie *inputError
		switch {
		case errors.As(err, &f):
			return f
		case errors.As(err, &ie) && artifacts.IsTemporary(ie.err):
			// S3 or the input's server is away for a while: like every
			// transient error, the job is redelivered.
			return transient(fmt.Errorf("%s: %w", field, err))
		case errors.As(err, &ie):
			return fail(CodeInputFetchFailed, state.StageSubmit, true, "%s: %v", field, err)
		case errors.Is(err, apiclient.ErrFileMissing):
			// The platform has no such place for the input.
			return fail(CodeInputUnreachable, state.StageSubmit, true, "%s: upload: %v", field, err)
		case errors.Is(err, apiclient.ErrFileExists):
			// The platform's words name its flag, not the spec's field.
			err = fmt.Errorf("%w; set \"cover\": true on %s to replace it", err, field)
		}
		return computeError(state.StageSubmit, field+": upload", err)
	}
	return nil
}

// StepStorageFull is the watchdog's step of a job held while the
// platform's storage is full: a wait bounded by StoreRefusalLimit, never
// judged stuck.
const StepStorageFull = "waiting_storage"

// uploadHeld runs upload, an upload of j's, and holds j while the
// platform answers that its storage is full (apiclient.ErrStorageFull),
// as a job whose artifact store refuses is held (holdJob): nothing is
// paid yet, the job is not failed, and it goes on once there is room.
func (r *Runner) uploadHeld(ctx context.Context, j *job, upload func() error) error {
	err := upload()
	if !errors.Is(err, apiclient.ErrStorageFull) {
		return err
	}
	// The wait may be long: let other jobs start meanwhile.
	j.d.Started()
	j.watch.Step(StepStorageFull, 0)
	defer r.resumeStep(j)
	for n := 0; errors.Is(err, apiclient.ErrStorageFull); n++ {
		if herr := r.holdJob(ctx, j, roomHold, n, err); herr != nil {
			return herr
		}
		err = upload()
	}
	return err
}

// uploadedBefore reports whether an earlier delivery of the job got past
// every input upload: it claimed the submit (Submits) or waited for
// budget (BudgetWaits), both after the uploads. Only then is a file of an
// input's name and size that delivery's upload; before, it may be one
// that lay there already (another run's, in a reused directory).
func uploadedBefore(rec *state.Record) bool { return rec.Submits > 0 || rec.BudgetWaits > 0 }

// heldInput reports whether directory dir on the platform holds a file
// name of the size the input's source announces: an earlier delivery's
// upload, which the platform places whole (an upload or a merge writes
// the file at once). That is all the platform can tell (its list gives
// names and sizes, no checksum). listed keeps each directory's list; a
// list that fails, a size the list or the source does not give, or any
// other doubt answers false: the input is uploaded.
func heldInput(ctx context.Context, sess *apiclient.ClusterSession, listed map[string][]apiclient.RemoteFile, dir, name string, open func() (io.ReadCloser, error)) bool {
	files, ok := listed[dir]
	if !ok {
		files, _ = sess.Files(ctx, dir)
		listed[dir] = files
	}
	i := slices.IndexFunc(files, func(f apiclient.RemoteFile) bool { return f.Name == name && f.Size >= 0 })
	if i < 0 {
		return false
	}
	src, err := open()
	if err != nil {
		return false
	}
	defer func() { _ = src.Close() }()
	sized, ok := src.(interface{ Size() int64 })
	return ok && sized.Size() == files[i].Size
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
	if errors.Is(err, errSuperseded) || errors.Is(err, errAlreadyFinished) {
		// Another delivery recorded its own job, or ended the job: this
		// delivery's platform job is not the job's and must not run on.
		j.log.Warn().Err(err).Str("upstream_job_id", jobID).Msg(LogSubmitSuperseded + "; cancelling this delivery's job")
		_ = r.settleRetried(sctx, j, sess, settlement{created: jobID, why: err.Error()})
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
func (r *Runner) waitJob(ctx context.Context, j *job, sess *apiclient.ClusterSession) (_ *apiclient.JobDetail, _ apiclient.JobPhase, err error) {
	// The job waits hours, holding its goroutine: let other jobs start.
	j.d.Started()
	ctx, span := r.startSpan(ctx, "wait")
	polls := 0
	defer func() { endWait(span, polls, err) }()
	since := r.cfg.Now()
	if j.rec.SubmittedAt != nil {
		since = *j.rec.SubmittedAt
	}
	w := &jobWatch{jobID: j.rec.Upstream.JobID, deadline: since.Add(r.cfg.ComputeTimeout),
		hq: apiclient.HistoryQuery{SchedulerID: "", Since: since.Add(-submitSkew)}}
	w.last = lastSeen(j.rec)
	cancelSent, cancelWake := false, j.cancel
	wait := time.Duration(0)
	for {
		polls++
		if r.pause(ctx, j, cancelWake, wait) {
			cancelWake = nil
		}
		if j.stopping() || ctx.Err() != nil {
			return nil, "", errStopping
		}
		wait = r.cfg.ComputePoll
		if !cancelSent && j.cancelled() {
			cancelSent = r.cancelJob(ctx, j, sess)
		}
		d, usage, noHistory, err := r.readJob(ctx, j, sess, w)
		if err != nil {
			if err := r.jobMissed(ctx, j, sess, w, err, noHistory); err != nil {
				return nil, "", err
			}
			continue
		}
		w.misses = 0
		phase, err := r.observeJob(ctx, j, w, d, usage)
		switch {
		case err != nil:
			return nil, "", err
		case phase.Terminal():
			return d, phase, nil
		case r.cfg.Now().After(w.deadline):
			return nil, "", r.timedOut(ctx, j, sess, "")
		}
	}
}

// lastSeen is the phase the platform last showed j's job as far as its
// record says: a resumed job the platform once showed (even queued) gets
// the history search when it goes missing (historySearch), not the few
// polls of a job never shown. Collecting: it finished before a restart,
// and is found again in the realtime detail or the history.
func lastSeen(rec *state.Record) apiclient.JobPhase {
	if rec.Status == state.StatusRunning || rec.Status == state.StatusCollecting {
		return apiclient.JobRunning
	}
	if p := apiclient.JobPhaseOf(&apiclient.JobDetail{JobStatus: rec.Upstream.Status}); p != apiclient.JobUnknown {
		return p
	}
	return ""
}

// jobWatch is what waitJob keeps between polls of a compute job.
type jobWatch struct {
	jobID    string
	deadline time.Time
	hq       apiclient.HistoryQuery
	// last is the phase the platform last showed, "" while it has shown
	// none (to this attempt or, as far as the record says, to an earlier
	// one); misses counts the answers in a row that had no job, and
	// missingSince is when they began.
	last         apiclient.JobPhase
	misses       int
	missingSince time.Time
}

// readJob reads the job's detail, completed or replaced by its history
// record: a terminal realtime detail takes the history's accounting (and
// the exit status a lagging detail may lack), and the history stands in
// when the realtime detail fails. noHistory: the platform has no history.
func (r *Runner) readJob(ctx context.Context, j *job, sess *apiclient.ClusterSession, w *jobWatch) (d *apiclient.JobDetail, usage json.RawMessage, noHistory bool, err error) {
	if d := r.listedLive(ctx, sess, w); d != nil {
		return d, nil, false, nil
	}
	d, err = sess.Job(ctx, w.jobID)
	if err == nil {
		if apiclient.JobPhaseOf(d).Terminal() {
			// One lookup; the realtime detail stands alone where the
			// history is silent.
			if h, herr := sess.HistoryJob(ctx, w.jobID, w.hq); herr == nil && apiclient.JobPhaseOf(h.Detail()).Terminal() {
				d, usage = mergeEnd(d, h), h.Usage()
			}
		}
		return d, usage, false, nil
	}
	h, herr := sess.HistoryJob(ctx, w.jobID, w.hq)
	switch {
	case herr == nil:
		j.log.Debug().Err(err).Str("history_state", h.JobState).Msg("job read from the job history")
		return h.Detail(), h.Usage(), false, nil
	case errors.Is(herr, apiclient.ErrJobNotFound), errors.Is(herr, apiclient.ErrNotSupported):
	default:
		j.log.Warn().Err(herr).Msg("job history query failed")
	}
	return nil, nil, errors.Is(herr, apiclient.ErrNotSupported), err
}

// listedLive returns the job as the region's realtime list shows it, when
// that shows it queued or running: one walk of the list per half poll
// interval serves every job of the region (apiclient.ListedJob). Anything
// else, an end, a status it does not know, a job the list does not show
// or a list that fails, returns nil and the job's own detail is asked,
// then its history: the list never ends a job, nor makes it vanish.
func (r *Runner) listedLive(ctx context.Context, sess *apiclient.ClusterSession, w *jobWatch) *apiclient.JobDetail {
	d, err := sess.ListedJob(ctx, w.jobID, r.cfg.ComputePoll/2)
	if err != nil {
		return nil
	}
	if p := apiclient.JobPhaseOf(d); p != apiclient.JobQueued && p != apiclient.JobRunning {
		return nil
	}
	return d
}

// jobMissed judges a poll that read no job (err): it returns the error
// that ends the wait, or nil to poll again.
func (r *Runner) jobMissed(ctx context.Context, j *job, sess *apiclient.ClusterSession, w *jobWatch, err error, noHistory bool) error {
	notFound := errors.Is(err, apiclient.ErrJobNotFound)
	if notFound {
		if w.misses == 0 {
			w.missingSince = r.cfg.Now()
		}
		w.misses++
	}
	switch {
	case notFound && w.last == "" && w.misses >= notFoundPolls:
		return fail(CodeJobVanished, state.StagePoll, false, "job %s, accepted at submit, is unknown to the platform (not found %d times in a row), nor in the job history", w.jobID, w.misses)
	case notFound && w.last != "" && w.misses >= notFoundPolls && r.cfg.Now().Sub(w.missingSince) >= historySearch:
		return fail(CodeJobVanished, state.StagePoll, false, "job %s disappeared from the platform: it was last seen %s, and neither the job detail nor the job history has had it for %s", w.jobID, w.last, historySearch)
	case notFound && w.last != "" && noHistory:
		// A platform without a history (compute-api.md's letter) keeps
		// ended jobs in the detail: gone means gone.
		return fail(CodeJobVanished, state.StagePoll, false, "job %s disappeared from the platform: it was last seen %s", w.jobID, w.last)
	case r.cfg.Now().After(w.deadline):
		return r.timedOut(ctx, j, sess, fmt.Sprintf(" (last query: %v)", err))
	case !notFound:
		j.log.Warn().Err(err).Msg("job query failed")
	}
	return nil
}

// observeJob records what a poll read, when it is news (pollNews) or
// brings the job's usage, and announces the job running.
func (r *Runner) observeJob(ctx context.Context, j *job, w *jobWatch, d *apiclient.JobDetail, usage json.RawMessage) (apiclient.JobPhase, error) {
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
			return "", transient(err)
		}
	}
	if phase == apiclient.JobRunning && w.last != apiclient.JobRunning {
		r.publishProgress(ctx, j, state.StatusRunning)
	}
	if phase != apiclient.JobUnknown {
		w.last = phase
	}
	return phase, nil
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
	switch apiclient.Classify(err) {
	case apiclient.ClassOK:
		j.log.Info().Msg("upstream compute job deleted; waiting for the platform to show its end")
		return true
	case apiclient.ClassRefused:
		if errors.Is(err, apiclient.ErrNotSupported) {
			j.log.Warn().Err(err).Msg(LogComputeCancelUnsupported)
			return true
		}
		// Refused: its end tells the outcome.
		j.log.Warn().Err(err).Msg("the platform refused the cancel; the job keeps the outcome it shows")
		return true
	case apiclient.ClassMissing:
		// Ended already: its end tells the outcome.
		j.log.Warn().Err(err).Msg("the platform no longer has the job; it keeps the outcome it shows")
		return true
	}
	// Busy (10001, 5xx, no answer): the job may still run and bill.
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
	var files []platformFile
	if p := cmp.Or(d.OutputPath, spec.Job.Stdout); p != "" {
		files = append(files, platformFile{jobspec.StdoutName, p})
	}
	if p := cmp.Or(d.ErrorPath, spec.Job.Stderr); p != "" {
		files = append(files, platformFile{jobspec.StderrName, p})
	}
	return r.collectFiles(ctx, j, sess, "compute", withOutputs(files, spec.Outputs))
}

// platformFile is a file on the platform to store as an artifact named
// name.
type platformFile struct{ name, path string }

// withOutputs adds the declared outputs to files (stdout and stderr),
// named as jobspec.OutputNames says, so that a pipeline's step can name
// them before they exist.
func withOutputs(files []platformFile, outputs []string) []platformFile {
	for i, name := range jobspec.OutputNames(outputs) {
		files = append(files, platformFile{name, outputs[i]})
	}
	return files
}

// collectFiles copies files from the platform as j's artifacts; origin
// ("compute", "container") prefixes the source each artifact records.
func (r *Runner) collectFiles(ctx context.Context, j *job, sess *apiclient.ClusterSession, origin string, files []platformFile) error {
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
			return body, "", origin + ":" + p, nil
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

// isTransientCompute reports whether a compute client error may pass: the
// platform answered busy (its internal error 10001 as HTTP 200, 429, 5xx,
// no answer), or the call was cut by a deadline or a stopping worker
// (context.Canceled). The class is the one reading of an answer
// (apiclient.Classify); an HTTP status alone would take a 10001 for a
// refusal.
func isTransientCompute(err error) bool {
	return apiclient.Classify(err) == apiclient.ClassBusy
}

// computeError maps a compute client error at stage: busy answers
// redeliver the job, the rest fail it. An outcome the runner already
// decided (a failure, a stop) passes as it is.
func computeError(stage state.Stage, what string, err error) error {
	if _, decided := errors.AsType[*failure](err); decided || errors.Is(err, errStopping) {
		return err
	}
	if isTransientCompute(err) {
		return transient(fmt.Errorf("%s: %w", what, err))
	}
	if errors.Is(err, apiclient.ErrStorageFull) {
		// Where no hold is in place (uploadHeld), a redelivery waits.
		return &retry{err: fmt.Errorf("%s: %w", what, err), code: CodeStorageFull}
	}
	code := CodeUpstreamRejected
	var ee *apiclient.EnvelopeError
	switch {
	case errors.Is(err, apiclient.ErrClusterNotFound):
		code = CodeClusterNotFound
	case errors.Is(err, apiclient.ErrUnauthorized):
		code = CodeUpstreamUnauthorized
	case errors.Is(err, apiclient.ErrNoPermission):
		code = CodeNoPermission
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
