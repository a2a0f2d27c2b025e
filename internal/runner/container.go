package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// Error codes of container jobs (docs/events.md).
const (
	CodeNoContainerService = "no_container_service"
	CodeInstanceEnded      = "instance_ended"
	CodeInstanceNotDeleted = "instance_not_deleted"
)

const (
	// containerRoomDelay is how soon a job whose resource group has no
	// room for its instance is delivered again.
	containerRoomDelay = time.Minute
	// deleteTimeout bounds one attempt to delete a job's instance; a
	// failed one redelivers the job, which tries again.
	deleteTimeout = 2 * time.Minute
	// deleteTries is how often one attempt sends the delete.
	deleteTries = 3
	// lookupTries is how often a lost create's instance is looked for in
	// the instance list before the job is handed back.
	lookupTries = 3
	// maxExitStatusBytes bounds the exit status file read.
	maxExitStatusBytes = 64
)

// deleteSpacing spaces the deletes of one attempt; lookupSpacing the
// lookups of a lost create's instance (1 s, then 2 s).
var (
	deleteSpacing = backoff.Exponential{Min: time.Second, Max: 4 * time.Second}
	lookupSpacing = backoff.Exponential{Min: time.Second, Max: 2 * time.Second}
)

// InstanceName is the instanceServiceName of job id's instance: how a
// delivery finds an instance whose create answer was lost, or whose id a
// killed worker never recorded.
func InstanceName(jobID string) string { return "sluice-" + jobID }

// runContainer runs a container job: upload inputs, check the resource
// group's room, create the instance (unless the record names one), wait
// for the script's exit status, collect its output, and delete the
// instance. Every end of the job (success, failure, cancel, timeout)
// deletes the instance first; a stop or a transient failure leaves it
// recorded, and the next delivery resumes it.
func (r *Runner) runContainer(ctx context.Context, j *job) error {
	sess, err := r.openSession(ctx, j, j.spec.Container.Cluster, "container.cluster", "open region session")
	if err != nil {
		// An earlier delivery's instance may live on: it is deleted
		// (or looked for) before the job ends.
		return r.settleFailed(ctx, j, err)
	}
	err = r.driveContainer(ctx, j, sess)
	return r.endContainer(ctx, j, sess, err)
}

// endContainer deletes j's instance when err ends the job, and hands the
// instance on to the next delivery otherwise.
func (r *Runner) endContainer(ctx context.Context, j *job, sess *apiclient.ClusterSession, err error) error {
	var f *failure
	ends := err == nil || errors.Is(err, errCancelled) || errors.As(err, &f)
	if !ends {
		if j.lease != nil && r.instanceKnown(j) {
			// The instance lives on: its lease counts until the next
			// delivery takes it over.
			j.lease.HandBack(0)
			j.lease = nil
		}
		return err
	}
	if derr := r.deleteInstance(ctx, j, sess); derr != nil {
		r.cfg.Metrics.ContainerNotDeleted(false)
		j.log.Error().Err(derr).Str("instance_id", j.rec.Upstream.InstanceID).
			Msg("container instance not deleted (still billed); the job is redelivered to delete it")
		return transient(fmt.Errorf("delete container instance: %w", derr))
	}
	return err
}

// instanceKnown reports whether j may have an instance upstream: one
// recorded, or a create sent whose answer was not recorded.
func (r *Runner) instanceKnown(j *job) bool {
	return j.rec.Upstream.InstanceID != "" || j.rec.Status == state.StatusSubmitting
}

// driveContainer runs j up to its end: the instance created (or found),
// the script ended, its output collected.
func (r *Runner) driveContainer(ctx context.Context, j *job, sess *apiclient.ClusterSession) error {
	if !sess.HasContainers() {
		return fail(CodeNoContainerService, state.StageSubmit, true,
			"region %s (%s) lists no container service (center.aiUrls)", sess.ClusterName(), sess.ClusterID())
	}
	workDir := r.workDir(j, sess)
	if workDir == "" {
		return fail(CodeInvalidSpec, state.StageValidate, true,
			"container.work_dir: required here: the center of region %s names no homePath for the default <homePath>/sluice/<job id>", sess.ClusterName())
	}
	if j.rec.Upstream.InstanceID == "" {
		if err := r.createInstance(ctx, j, sess, workDir); err != nil {
			return err
		}
	} else if r.cfg.Quota != nil && j.lease == nil {
		// Resumed: the instance is alive upstream.
		j.claimed = true
		j.lease = r.cfg.Quota.Take(j.kind, j.id, j.d.Msg.Reply())
	}
	j.log = j.log.With().Str("cluster_id", j.rec.Upstream.ClusterID).Str("instance_id", j.rec.Upstream.InstanceID).Logger()
	exit, err := r.waitScript(ctx, j, sess, workDir)
	if err != nil {
		return err
	}
	if err := r.collectContainer(ctx, j, sess, workDir, exit); err != nil {
		return err
	}
	if exit != 0 {
		return fail(CodeExitStatus, state.StagePoll, false, "the script exited with status %d in instance %s", exit, j.rec.Upstream.InstanceID)
	}
	return nil
}

// workDir is the job's work directory: the spec's, else
// <homePath>/sluice/<job id>.
func (r *Runner) workDir(j *job, sess *apiclient.ClusterSession) string {
	if wd := j.spec.Container.WorkDir; wd != "" {
		return path.Clean(wd)
	}
	home := sess.HomePath()
	if home == "" || !strings.HasPrefix(home, "/") || strings.ContainsAny(home, "'\\") {
		return ""
	}
	return path.Join(home, "sluice", j.id)
}

// createInstance checks the group's room, uploads the inputs and the
// wrapped script, and creates the instance, or adopts the one an earlier
// delivery created (found by its name), and records its id.
func (r *Runner) createInstance(ctx context.Context, j *job, sess *apiclient.ClusterSession, workDir string) error {
	spec := j.spec.Container
	// The room check is the first call to the region's container
	// service: a region without one fails here, before anything is
	// uploaded or created.
	if err := r.checkRoom(ctx, j, sess); err != nil {
		return err
	}
	if !submittedOrLater(j.rec.Status) && j.rec.Status != state.StatusSubmitting {
		if err := r.uploadInputs(ctx, j, sess, "container", spec.Inputs); err != nil {
			return err
		}
	}
	wrapper := ContainerStartScript(j.id, workDir, spec.Script)
	// The wrapper goes to the work directory too: it makes the directory
	// the instance mounts, and shows what ran.
	if err := r.uploadHeld(ctx, j, func() error { return uploadText(ctx, sess, path.Join(workDir, j.id+".start.sh"), wrapper) }); err != nil {
		return computeError(state.StageSubmit, "container.work_dir: upload the start script", err)
	}
	again := j.rec.Status == state.StatusSubmitting
	if !again {
		// No create was sent before: the exit status file is emptied
		// before the claim, where a full storage holds the job as any
		// upload does.
		if err := r.uploadHeld(ctx, j, func() error { return r.clearExit(ctx, sess, workDir, j.id) }); err != nil {
			return computeError(state.StageSubmit, "container.work_dir: clear an earlier exit status file", err)
		}
	}
	if j.cancelled() {
		return errCancelled
	}
	if err := r.admit(ctx, j); err != nil {
		return err
	}
	sctx, cancel := r.paidBudget(ctx)
	defer cancel()
	if err := r.claimSubmit(sctx, j, func(rec *state.Record) { rec.Upstream.ClusterID = sess.ClusterID() }); err != nil {
		return transient(err)
	}
	if again {
		// A create was sent before and its answer not recorded (a lost
		// answer, a worker killed in between): adopt its instance.
		found, err := r.settleUnrecorded(sctx, j, sess, adoptOne)
		if err != nil {
			// Left at "submitting": an instance may exist.
			return transient(fmt.Errorf("look for the instance of an earlier create: %w", err))
		}
		if found != "" {
			j.log.Warn().Str("instance_id", found).Msg("found the instance an earlier delivery created; resuming it")
			return r.recordInstance(ctx, sctx, j, sess, found)
		}
		// Only now, none found: the file may hold that instance's status.
		if err := r.clearExit(sctx, sess, workDir, j.id); err != nil {
			return computeError(state.StageSubmit, "container.work_dir: clear an earlier exit status file", err)
		}
	}
	req := spec.Request(jobspec.ContainerTarget{Name: InstanceName(j.id), WorkDir: workDir, StartScript: wrapper})
	id, err := sess.CreateInstance(sctx, req)
	// What the paid create returned gets a budget of its own (paidBudget).
	wctx, wcancel := r.paidBudget(ctx)
	defer wcancel()
	if errors.Is(err, apiclient.ErrAmbiguous) {
		j.log.Warn().Err(err).Msg("the create's answer was lost; looking for the instance by its name")
		if found, _ := r.findLost(wctx, j, sess); found != "" {
			id, err = found, nil
		}
		if id == "" {
			// Left at "submitting": the next delivery looks again
			// before it creates.
			j.unseenTask = true
			return transient(fmt.Errorf("create container instance: %w (not found by name %s yet)", err, InstanceName(j.id)))
		}
	}
	if err != nil {
		return r.backOutCreate(wctx, j, sess, err)
	}
	return r.recordInstance(ctx, wctx, j, sess, id)
}

// clearExit empties the exit status file an earlier instance of the job
// may have left in workDir, before a new instance is created: read as
// the new script's status, it would end the job at once. An empty file
// reads as "not written yet" (readExit); the wrapper's rename replaces
// it. The efile API has a remove, which sluice does not call yet: the
// covering upload it already uses does the same here.
func (r *Runner) clearExit(ctx context.Context, sess *apiclient.ClusterSession, workDir, jobID string) error {
	return uploadText(ctx, sess, filesOf(workDir, jobID).exit, "")
}

// uploadText writes text to the file at p on the platform, covering it.
func uploadText(ctx context.Context, sess *apiclient.ClusterSession, p, text string) error {
	return sess.Upload(ctx, path.Dir(p), path.Base(p), true, func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(text)), nil
	})
}

// backOutCreate ends a create that created nothing: a refusal fails the
// job, naming the region and the image (a region holding no copy of the
// image refuses the create, and no call lists a region's images to
// check before), anything passing hands it back at "received".
func (r *Runner) backOutCreate(ctx context.Context, j *job, sess *apiclient.ClusterSession, err error) error {
	switch {
	case errors.Is(err, apiclient.ErrNoContainerService):
		return fail(CodeNoContainerService, state.StageSubmit, true, "%v", err)
	case !isTransientCompute(err):
		in := j.spec.Container.Instance
		return computeError(state.StageSubmit, fmt.Sprintf("create container instance in region %s (%s) with image %s (version %s)",
			sess.ClusterName(), sess.ClusterID(), in.Image, in.Version), err)
	}
	return r.backOutSubmit(ctx, j, err)
}

// recordInstance records the instance id, before anything else happens.
func (r *Runner) recordInstance(ctx, sctx context.Context, j *job, sess *apiclient.ClusterSession, id string) error {
	now := r.cfg.Now().UTC()
	instanceID := func(rec *state.Record) string { return rec.Upstream.InstanceID }
	err := r.writeRetried(sctx, j, submitWindow(id, instanceID), state.StatusSubmitted, set(func(rec *state.Record) {
		rec.Upstream.ClusterID = sess.ClusterID()
		rec.Upstream.InstanceID = id
		rec.SubmittedAt = &now
	}))
	if errors.Is(err, errSuperseded) || errors.Is(err, errAlreadyFinished) {
		// Another delivery recorded its own instance, or ended the job:
		// this delivery's instance is not the job's and must not live on.
		j.log.Warn().Err(err).Str("instance_id", id).Msg(LogSubmitSuperseded + "; deleting this delivery's instance")
		if derr := r.settleRetried(ctx, j, sess, settlement{created: id, why: err.Error()}); derr != nil {
			r.cfg.Metrics.ContainerNotDeleted(true)
			j.log.Error().Err(derr).Str("instance_id", id).Msg("superseded container instance NOT deleted: delete it by hand (docs/operating.md)")
		}
		return err
	}
	if err != nil {
		j.log.Error().Err(err).Str("instance_id", id).Msg("instance created but its id could not be recorded; the next delivery finds it by name")
		j.unseenTask = true
		return transient(err)
	}
	j.log.Info().Str("instance_id", id).Msg("container instance created")
	r.publishProgress(ctx, j, state.StatusSubmitted)
	return nil
}

// checkRoom asks the node resource quota of the job's group. A group
// whose quota is below what the job asks for has no room now: the job is
// delivered again later, not failed. A quota field the answer leaves out
// (0) does not count.
func (r *Runner) checkRoom(ctx context.Context, j *job, sess *apiclient.ClusterSession) error {
	in := j.spec.Container.Instance
	res, err := sess.NodeResources(ctx, in.Accelerator, in.ResourceGroup)
	if errors.Is(err, apiclient.ErrNoContainerService) {
		return fail(CodeNoContainerService, state.StageSubmit, true, "%v", err)
	}
	if err != nil {
		return computeError(state.StageSubmit, "container.instance.resource_group: query the node resource quota", err)
	}
	var short []string
	if res.CPUNumber > 0 && int64(in.CPUs) > res.CPUNumber {
		short = append(short, fmt.Sprintf("cpus %d > %d", in.CPUs, res.CPUNumber))
	}
	if res.MemorySize > 0 && int64(in.RAMMB) > res.MemorySize {
		short = append(short, fmt.Sprintf("ram_mb %d > %d", in.RAMMB, res.MemorySize))
	}
	if cards := acceleratorLimit(in.Accelerator, res); in.GPUs > 0 && cards > 0 && int64(in.GPUs) > cards {
		short = append(short, fmt.Sprintf("gpus %d > %d", in.GPUs, cards))
	}
	if len(short) == 0 {
		return nil
	}
	j.log.Info().Strs("short", short).Msg("the resource group has no room for the instance now; waiting")
	return &retry{err: fmt.Errorf("resource group %s has no room for the instance now (%s)", in.ResourceGroup, strings.Join(short, ", ")), delay: containerRoomDelay}
}

// acceleratorLimit is the card limit of accelerator in res: the type's
// own limit field, else gpuNumber.
func acceleratorLimit(accelerator string, res *apiclient.NodeResources) int64 {
	var v int64
	switch accelerator {
	case "gpu":
		v = res.NvLimits
	case "dcu":
		v = res.DcuLimits
	case "mlu":
		v = res.MluLimits
	}
	if v == 0 {
		v = res.GPUNumber
	}
	return v
}

// waitScript polls the exit status file and the instance detail every
// ComputePoll until the script has ended (its exit status), the instance
// ended without one, the timeout passed, or a cancel came.
func (r *Runner) waitScript(ctx context.Context, j *job, sess *apiclient.ClusterSession, workDir string) (int, error) {
	j.d.Started()
	id := j.rec.Upstream.InstanceID
	files := filesOf(workDir, j.id)
	since := r.cfg.Now()
	if j.rec.SubmittedAt != nil {
		since = *j.rec.SubmittedAt
	}
	deadline := since.Add(time.Duration(j.spec.Container.Instance.TimeoutSeconds()) * time.Second)
	misses := 0
	wait := time.Duration(0)
	for {
		r.pause(ctx, j, j.cancel, wait)
		if j.stopping() || ctx.Err() != nil {
			return 0, errStopping
		}
		wait = r.cfg.ComputePoll
		exit, ok, err := r.readExit(ctx, sess, files.exit)
		if err != nil {
			j.log.Warn().Err(err).Msg("exit status query failed")
		}
		if ok {
			return exit, r.recordExit(ctx, j, exit)
		}
		if j.cancelled() {
			// The script has not ended: the cancel stands.
			return 0, errCancelled
		}
		in, err := sess.Instance(ctx, id)
		switch apiclient.Classify(err) {
		case apiclient.ClassMissing:
			misses++
			if misses >= notFoundPolls {
				return 0, fail(CodeInstanceEnded, state.StagePoll, false, "instance %s disappeared from the platform before the script's exit status was written", id)
			}
		case apiclient.ClassBusy, apiclient.ClassRefused, apiclient.ClassAmbiguous:
			// Says nothing about the instance, which may run and bill.
			j.log.Warn().Err(err).Msg("instance query failed")
		case apiclient.ClassOK:
			misses = 0
			phase := apiclient.InstancePhaseOf(in)
			if err := r.observeInstance(ctx, j, in, phase); err != nil {
				return 0, err
			}
			if phase.Ended() {
				// The file may have landed just before the end.
				if exit, ok, _ := r.readExit(ctx, sess, files.exit); ok {
					return exit, r.recordExit(ctx, j, exit)
				}
				return 0, fail(CodeInstanceEnded, state.StagePoll, false,
					"instance %s ended %s before the script's exit status was written (%s)", id, in.Status, files.exit)
			}
		}
		if r.cfg.Now().After(deadline) {
			return 0, fail(CodeTimeout, state.StagePoll, false, "the script did not end within container.instance.timeout %s (instance %s)",
				j.spec.Container.Instance.Timeout, id)
		}
	}
}

// observeInstance records a new instance status and announces running.
func (r *Runner) observeInstance(ctx context.Context, j *job, in *apiclient.Instance, phase apiclient.InstancePhase) error {
	status := j.rec.Status
	if phase == apiclient.InstanceRunning {
		status = state.StatusRunning
	}
	if in.Status == j.rec.Upstream.Status && status == j.rec.Status && r.cfg.Now().Sub(j.rec.UpdatedAt) <= r.cfg.StateTTL/4 {
		return nil
	}
	announce := status == state.StatusRunning && j.rec.Status != state.StatusRunning
	if err := r.write(ctx, j, live, status, set(func(rec *state.Record) { rec.Upstream.Status = in.Status })); err != nil {
		return transient(err)
	}
	if announce {
		r.publishProgress(ctx, j, state.StatusRunning)
	}
	return nil
}

// recordExit records the script's exit status.
func (r *Runner) recordExit(ctx context.Context, j *job, exit int) error {
	code := strconv.Itoa(exit)
	if j.rec.Status == state.StatusCollecting && j.rec.Upstream.ExitCode != nil && *j.rec.Upstream.ExitCode == code {
		return nil
	}
	if err := r.writeRetried(ctx, j, live, state.StatusCollecting, set(func(rec *state.Record) { rec.Upstream.ExitCode = &code })); err != nil {
		return transient(err)
	}
	return nil
}

// readExit reads the exit status file: ok is false while it is not there
// (the platform answers an error for a missing file) or not a number yet.
func (r *Runner) readExit(ctx context.Context, sess *apiclient.ClusterSession, p string) (exit int, ok bool, err error) {
	body, err := sess.Download(ctx, p)
	if err != nil {
		if isTransientCompute(err) {
			return 0, false, err
		}
		return 0, false, nil
	}
	defer func() { _ = body.Close() }()
	b, err := io.ReadAll(io.LimitReader(body, maxExitStatusBytes))
	if err != nil {
		return 0, false, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false, nil
	}
	return n, true, nil
}

// collectContainer copies the script's stdout and stderr, and, when it
// exited 0, every declared output.
func (r *Runner) collectContainer(ctx context.Context, j *job, sess *apiclient.ClusterSession, workDir string, exit int) error {
	f := filesOf(workDir, j.id)
	files := []platformFile{{jobspec.StdoutName, f.stdout}, {jobspec.StderrName, f.stderr}}
	if exit == 0 {
		files = withOutputs(files, j.spec.Container.Outputs)
	}
	return r.collectFiles(ctx, j, sess, "container", files)
}

// deleteOnce sends the delete of j's instance once: done when nothing is
// left of it.
func (r *Runner) deleteOnce(ctx context.Context, j *job, sess *apiclient.ClusterSession, try int) (done bool, err error) {
	id := j.rec.Upstream.InstanceID
	if id == "" {
		if !r.instanceKnown(j) {
			return true, nil
		}
		_, err := r.settleUnrecorded(ctx, j, sess, settlement{why: "the job ends"})
		return err == nil, err
	}
	if err = sess.DeleteInstances(ctx, id); err == nil {
		j.log.Info().Msg("container instance deleted")
		return true, nil
	}
	// Only the platform saying the instance is not there confirms a
	// failed delete; a busy or refused detail leaves it billing.
	if _, derr := sess.Instance(ctx, id); apiclient.Classify(derr) == apiclient.ClassMissing {
		return true, nil
	}
	j.log.Warn().Err(err).Int("try", try+1).Msg("container instance delete failed")
	return false, err
}

// deleteInstance deletes j's instance (the recorded one, or those named
// after j when a create's answer was never recorded), trying a few times
// within deleteTimeout. An instance the platform no longer knows counts
// as deleted. The lease is given back once nothing is left.
func (r *Runner) deleteInstance(ctx context.Context, j *job, sess *apiclient.ClusterSession) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	_, err := r.retry(dctx, backoff.Retry{Spacing: deleteSpacing, Attempts: deleteTries}, func(ctx context.Context, try int) (bool, error) {
		return r.deleteOnce(ctx, j, sess, try)
	})
	if err != nil {
		return err
	}
	if j.lease != nil {
		r.releaseQuota(j)
	}
	return nil
}
