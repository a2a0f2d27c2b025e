package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// A paid create or submit whose answer the record does not hold (a lost
// answer, a worker stopped in between, an answer that came after another
// delivery moved the job on) may have left a container instance or a
// platform job billing upstream. Every path that ends a job, or goes on
// with it, before its submit is recorded settles that leftover here, in
// one way: found by the identity sluice gave it (InstanceName,
// platformJobName: never a name a user chose), then adopted or deleted.
// Media tasks cannot be found by anything sluice gave them; media.go
// handles those.

// CodeJobNotCancelled: a compute job ended (cancelled, too many
// deliveries) but the platform job its submit created could not be
// cancelled and may still run (docs/events.md).
const CodeJobNotCancelled = "job_not_cancelled"

// LogLeftoverDeleted is logged, with the upstream ids, when what an
// unrecorded create or submit made upstream is deleted (compute:
// cancelled).
const LogLeftoverDeleted = "deleting what an unrecorded create or submit of the job made upstream"

// settlement says what settleUnrecorded does with what it finds.
type settlement struct {
	// adopt: the job goes on with one of them (returned), the others
	// are deleted; otherwise every one is deleted.
	adopt bool
	// created: the one upstream id this delivery knows its own create or
	// submit made (an answer the record refused): only it is settled,
	// nothing is looked for.
	created string
	// why says, in the log, why they are deleted.
	why string
}

// adoptOne adopts what an earlier create or submit of the job made, and
// deletes any other it made too (each one paid).
var adoptOne = settlement{adopt: true, why: "another create or submit of the job made more than one; one is adopted"}

// leftover is a resource an unrecorded create or submit made upstream.
type leftover struct {
	id string
	// ended: the platform shows the job ended, nothing is left to stop.
	ended bool
}

// settleUnrecorded settles what j's unrecorded creates or submits made
// upstream (see settlement) and returns the id adopted ("" when none).
// An error leaves something upstream that may still bill.
func (r *Runner) settleUnrecorded(ctx context.Context, j *job, sess *apiclient.ClusterSession, s settlement) (string, error) {
	found := []leftover{{id: s.created}}
	if s.created == "" {
		var err error
		if found, err = r.findUnrecorded(ctx, j, sess); err != nil {
			return "", err
		}
	}
	kept := ""
	if s.adopt && len(found) > 0 {
		kept, found = found[0].id, found[1:]
	}
	var ids []string
	for _, f := range found {
		if !f.ended {
			ids = append(ids, f.id)
		}
	}
	if len(ids) == 0 {
		return kept, nil
	}
	j.log.Warn().Strs("upstream_ids", ids).Str("adopted", kept).Str("why", s.why).Msg(LogLeftoverDeleted)
	err := r.deleteLeftovers(ctx, j, sess, ids)
	r.cfg.Metrics.Leftovers(j.kind, len(ids), err == nil)
	if err != nil {
		j.log.Error().Err(err).Strs("upstream_ids", ids).Msg("what an unrecorded create or submit made upstream was NOT deleted and may still bill")
		return "", err
	}
	return kept, nil
}

// settleRetried is settleUnrecorded tried deleteTries times, as a
// container delete is, within deleteTimeout even when ctx ends: a path
// that ends the job, or drops what it made, has no later delivery to
// look again. A refusal (*failure) is not tried again.
func (r *Runner) settleRetried(ctx context.Context, j *job, sess *apiclient.ClusterSession, s settlement) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	_, err := r.retry(dctx, backoff.Retry{Spacing: deleteSpacing, Attempts: deleteTries}, func(ctx context.Context, _ int) (bool, error) {
		_, err := r.settleUnrecorded(ctx, j, sess, s)
		var f *failure
		return errors.As(err, &f), err
	})
	return err
}

// findLost looks for what a create or submit whose answer was lost made,
// adopting one (settleUnrecorded), up to lookupTries times: a list that
// fails, or does not show it yet, is asked again. It returns the id
// adopted ("" when none) and the last look's error.
func (r *Runner) findLost(ctx context.Context, j *job, sess *apiclient.ClusterSession) (string, error) {
	var id string
	var err error
	_, _ = r.retry(ctx, backoff.Retry{Spacing: lookupSpacing, Jitter: backoff.JitterNone, Attempts: lookupTries},
		func(ctx context.Context, _ int) (bool, error) {
			id, err = r.settleUnrecorded(ctx, j, sess, adoptOne)
			var f *failure
			if id != "" || errors.As(err, &f) {
				return true, nil
			}
			return false, cmp.Or(err, errors.New("not found yet"))
		})
	return id, err
}

// findUnrecorded lists what carries j's identity upstream, the one to
// adopt first: a live one before an ended one, then the earliest.
func (r *Runner) findUnrecorded(ctx context.Context, j *job, sess *apiclient.ClusterSession) ([]leftover, error) {
	if j.kind == string(jobspec.KindContainer) {
		list, err := sess.FindInstances(ctx, InstanceName(j.id))
		if err != nil {
			return nil, err
		}
		found := make([]leftover, len(list))
		for i, in := range list {
			// An ended instance is billed while it exists: deleted too.
			found[i] = leftover{id: in.ID}
		}
		slices.SortStableFunc(found, func(a, b leftover) int {
			return cmp.Compare(ended(list, a.id), ended(list, b.id))
		})
		return found, nil
	}
	return r.findSubmitted(ctx, j, sess)
}

// ended is 1 when the instance id in list has ended, else 0.
func ended(list []apiclient.Instance, id string) int {
	for _, in := range list {
		if in.ID == id && apiclient.InstancePhaseOf(&in).Ended() {
			return 1
		}
	}
	return 0
}

// deleteLeftovers deletes the instances, or cancels the platform jobs,
// ids. A job the platform shows ended (or no longer knows) needs no
// cancel.
func (r *Runner) deleteLeftovers(ctx context.Context, j *job, sess *apiclient.ClusterSession, ids []string) error {
	if j.kind == string(jobspec.KindContainer) {
		return sess.DeleteInstances(ctx, ids...)
	}
	var errs []error
	for _, id := range ids {
		err := sess.CancelJob(ctx, "", "", id)
		if err == nil || errors.Is(err, apiclient.ErrJobNotFound) {
			continue
		}
		if d, derr := sess.Job(ctx, id); derr == nil && apiclient.JobPhaseOf(d).Terminal() {
			continue
		}
		errs = append(errs, fmt.Errorf("cancel platform job %s: %w", id, err))
	}
	return errors.Join(errs...)
}

// platformJobName is the name (GAP_JOB_NAME) sluice submits j's compute
// job under: the sluice job id, after the name the spec gives when that
// is another ("<name>.<job id>"). Job ids hold no ".", so the name
// carries j's identity: no other job's submit has it, whatever names
// users give (enqueue retry and dlq replay copy compute.job.name).
func platformJobName(j *job) string {
	c := j.spec.Compute.Job
	name := cmp.Or(c.Extra[apiclient.KeyJobName], c.Name)
	if name == "" || name == j.id {
		return j.id
	}
	return name + "." + j.id
}

// maxPlatformJobName is the longest platform job name, in bytes, sluice
// submits. The platform documents no limit; its schedulers keep 236
// (PBS Pro) or 255 (Slurm's accounting) bytes, and a name cut short would
// not be found again after a lost answer (docs/upstream-assumptions.md).
const maxPlatformJobName = 236

// checkPlatformJobName refuses a spec whose platform job name is longer
// than maxPlatformJobName, naming the field that gives the name, before
// anything is submitted.
func checkPlatformJobName(j *job) error {
	name := platformJobName(j)
	if len(name) <= maxPlatformJobName {
		return nil
	}
	field := "compute.job.name"
	if _, ok := j.spec.Compute.Job.Extra[apiclient.KeyJobName]; ok {
		field = "compute.job.extra." + apiclient.KeyJobName
	}
	return fail(CodeInvalidSpec, state.StageValidate, true,
		"%s: the platform job name sluice submits, the name followed by \".<job id>\", is %d bytes, more than the %d the platform keeps: give a shorter name",
		field, len(name), maxPlatformJobName)
}

// submitSkew is how far before sluice's record of a job a job the
// platform lists may say it was submitted and still be one sluice sent:
// clocks and the zone the platform writes its times in may differ.
const submitSkew = 12 * time.Hour

// findSubmitted looks for the platform jobs j's submits created: those
// named as its record says its submits were (platformJobName for a
// record that says nothing), submitted since j's record was created
// (less submitSkew), in the realtime job list and then the history. A
// platform without those lists (compute-api.md's letter) shows none. A
// record written before sluice named platform jobs after the job id is
// matched by its old name too (legacyJobName).
func (r *Runner) findSubmitted(ctx context.Context, j *job, sess *apiclient.ClusterSession) ([]leftover, error) {
	name, old := cmp.Or(j.rec.Upstream.JobName, platformJobName(j)), legacyJobName(j)
	after := j.rec.CreatedAt.Add(-submitSkew)
	named := func(n, at string) bool { return (n == name || (old != "" && n == old)) && submittedAfter(at, after) }
	schedID, err := sess.SchedulerID(ctx)
	if err != nil {
		return nil, err
	}
	jobs, err := sess.Jobs(ctx, schedID)
	switch {
	case errors.Is(err, apiclient.ErrNotSupported):
	case err != nil:
		return nil, err
	}
	found := map[string]bool{} // id → ended
	for _, s := range jobs {
		if named(s.JobName, s.SubmitTime) {
			found[s.JobID] = apiclient.JobPhaseOf(&apiclient.JobDetail{JobStatus: s.Status}).Terminal()
		}
	}
	recs, err := sess.HistoryJobs(ctx, apiclient.HistoryQuery{SchedulerID: schedID, Since: after},
		func(h *apiclient.HistoryRecord) bool { return named(h.JobName, h.JobQueueTime) })
	if err != nil && !errors.Is(err, apiclient.ErrNotSupported) {
		return nil, err
	}
	for _, h := range recs {
		found[h.JobID] = true
	}
	if old != "" && len(found) > 1 {
		// A name users choose: other jobs' runs may carry it too.
		return nil, fail(CodeSubmitAmbiguous, state.StageSubmit, true,
			"the job was submitted as %q by an earlier version of sluice and its answer not recorded; %d platform jobs of that name match and sluice cannot tell which is this job's, so it does not submit again: check them on the platform",
			old, len(found))
	}
	out := make([]leftover, 0, len(found))
	for id, ended := range found {
		out = append(out, leftover{id: id, ended: ended})
	}
	slices.SortFunc(out, func(a, b leftover) int {
		if a.ended != b.ended {
			return map[bool]int{false: -1, true: 1}[a.ended]
		}
		return compareJobIDs(a.id, b.id)
	})
	return out, nil
}

// legacyJobName is the platform job name an earlier version of sluice
// submitted j under (the spec's name alone, else the job id), when j's
// record was written by that version (it names no platform job name) and
// that name is not platformJobName(j); else "". Only one platform job of
// that name within the record's window is taken as j's (findSubmitted).
func legacyJobName(j *job) string {
	if j.rec.Upstream.JobName != "" || j.spec == nil || j.spec.Compute == nil {
		return ""
	}
	c := j.spec.Compute.Job
	if old := cmp.Or(c.Extra[apiclient.KeyJobName], c.Name, j.id); old != platformJobName(j) {
		return old
	}
	return ""
}

// compareJobIDs orders platform job ids by number where both are
// numbers (the scheduler counts up), else as text.
func compareJobIDs(a, b string) int {
	na, ea := strconv.ParseUint(strings.TrimSpace(a), 10, 64)
	nb, eb := strconv.ParseUint(strings.TrimSpace(b), 10, 64)
	if ea == nil && eb == nil {
		return cmp.Compare(na, nb)
	}
	return strings.Compare(a, b)
}

// submittedAfter reports whether a platform time (in its zone; an
// unreadable or empty one counts as a match) is not before t.
func submittedAfter(platformTime string, t time.Time) bool {
	at, err := time.ParseInLocation(apiclient.PlatformTimeLayout, strings.TrimSpace(platformTime), apiclient.PlatformZone)
	return err != nil || !at.Before(t)
}

// settleEnd settles what j may have upstream before it ends by a path
// that did not run it (cancelled, too many deliveries): err is how it
// ends, returned unchanged once nothing is left upstream, or a failure
// saying what could not be deleted. Media jobs pass through.
func (r *Runner) settleEnd(ctx context.Context, j *job, err error) error {
	serr := r.settleUpstream(ctx, j)
	if serr == nil {
		return err
	}
	what := "the job ended"
	var f *failure
	if errors.As(err, &f) {
		what = f.msg
	} else if errors.Is(err, errCancelled) {
		what = "the job was cancelled"
	}
	if j.kind == string(jobspec.KindCompute) {
		return fail(CodeJobNotCancelled, stageOf(j.rec.Status), false,
			"%s, but the platform job its submit created (name %s) could not be cancelled and may still run: %v", what, platformJobName(j), serr)
	}
	r.cfg.Metrics.ContainerNotDeleted(true)
	j.log.Error().Err(serr).Str("instance_id", j.rec.Upstream.InstanceID).Str("instance_name", InstanceName(j.id)).
		Msg("job ends with its container instance NOT deleted: delete it by hand (docs/operating.md)")
	return fail(CodeInstanceNotDeleted, stageOf(j.rec.Status), false,
		"%s, but its container instance %q (name %s) could not be deleted and is still billed: %v",
		what, j.rec.Upstream.InstanceID, InstanceName(j.id), serr)
}

// settleFailed settles what j may have upstream when err ends it before
// its run got under way (its session did not open, or its submit or
// create did not go through): an earlier delivery may have left an
// instance or a platform job at "submitting", or recorded one. Once
// nothing is left, err ends the job as it says. While the platform
// cannot be reached to settle, the job does not end: it is redelivered,
// and at SLUICE_MAX_DELIVER settleEnd ends it job_not_cancelled or
// instance_not_deleted, never a plain failure that hides what bills.
func (r *Runner) settleFailed(ctx context.Context, j *job, err error) error {
	var f *failure
	if !errors.As(err, &f) && !errors.Is(err, errCancelled) {
		return err
	}
	serr := r.settleUpstream(ctx, j)
	if serr == nil {
		return err
	}
	j.log.Warn().Err(serr).AnErr("ends_with", err).Msg(LogSettleBeforeEnd)
	return transient(fmt.Errorf("%v; %s: %w", err, LogSettleBeforeEnd, serr))
}

// LogSettleBeforeEnd is logged when a job that would end cannot settle
// what an earlier delivery may have left upstream: it is redelivered.
const LogSettleBeforeEnd = "what an earlier delivery may have made upstream could not be settled; the job is redelivered before it ends"

// settleUpstream deletes j's instance or cancels its platform job, the
// recorded one or those an unrecorded create or submit made, when j may
// have one; nil when nothing is left (media jobs have nothing here).
func (r *Runner) settleUpstream(ctx context.Context, j *job) error {
	switch {
	case j.kind == string(jobspec.KindContainer) && r.instanceKnown(j):
		sess, err := r.clusterSessionOf(ctx, j)
		if err != nil {
			return err
		}
		return r.deleteInstance(ctx, j, sess)
	case j.kind == string(jobspec.KindCompute) && r.submitKnown(j):
		sess, err := r.clusterSessionOf(ctx, j)
		if err != nil {
			return err
		}
		return r.settleRetried(ctx, j, sess, settlement{created: j.rec.Upstream.JobID, why: "the job ends before it ran"})
	}
	return nil
}

// submitKnown reports whether j may have a platform job upstream that
// still runs: one recorded, or a submit sent whose answer was not
// recorded.
func (r *Runner) submitKnown(j *job) bool {
	return j.rec.Upstream.JobID != "" || j.rec.Status == state.StatusSubmitting
}

// clusterSessionOf opens the session of the cluster j's record names,
// else its spec's.
func (r *Runner) clusterSessionOf(ctx context.Context, j *job) (*apiclient.ClusterSession, error) {
	if r.cfg.Compute == nil {
		return nil, errors.New("the compute platform is not configured")
	}
	cluster := j.rec.Upstream.ClusterID
	if cluster == "" && j.spec != nil && j.spec.Container != nil {
		cluster = j.spec.Container.Cluster
	}
	if cluster == "" && j.spec != nil && j.spec.Compute != nil {
		cluster = j.spec.Compute.Cluster
	}
	return r.cfg.Compute.Cluster(ctx, cluster)
}
