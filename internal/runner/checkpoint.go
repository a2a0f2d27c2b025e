package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// smallArtifact is the size up to which an artifact is recorded with the
// job's next write rather than at once (copyArtifact): the size the store
// copies in one PUT (artifacts.StoreConfig.SmallSize's default).
const smallArtifact = 1 << 20

// errNotFresh backs a job out of its first write, which was to create its
// record, when the record exists (see firstWriteCreates): nothing was paid
// for, and the job is redelivered at once to read the record and go on
// from it.
var errNotFresh = errors.New("the job's record exists already (a cancel that came first, or the same job published again)")

// publishProgress publishes a submitted or running event without waiting
// for its acknowledgement. Progress events are best effort: a failure is
// logged and the job goes on.
func (r *Runner) publishProgress(ctx context.Context, j *job, status state.Status) {
	r.enterStep(j, status)
	if err := r.cfg.Events.PublishAsync(ctx, events.FromRecord(j.rec, status, r.cfg.Now())); err != nil {
		j.log.Warn().Err(err).Str("status", string(status)).Msg("progress event not published")
	}
}

// outputPrefix is the spec's output.prefix, or "".
func outputPrefix(s *jobspec.Spec) string {
	if s == nil || s.Output == nil {
		return ""
	}
	return s.Output.Prefix
}

// copyArtifact copies one artifact to <prefix>/.../<job>/<name> unless the
// record already has it, then records it. The job's last artifact, and
// every small one (up to smallArtifact bytes), is recorded with the job's
// next write instead, the terminal record at the latest: a worker that
// dies in between copies it again (onto the same key), which for a small
// object costs less than a write per artifact. A large artifact is
// recorded at once, so that a restart does not copy it again. Copies
// retry on their own; a copy that still fails never leads to a second
// submit. copying, when set, is told each time a copy takes its slot.
func (r *Runner) copyArtifact(ctx context.Context, j *job, name string, last bool, open artifacts.OpenFunc, copying func()) error {
	key, err := r.cfg.Store.Key(outputPrefix(j.spec), j.kind, j.id, name)
	if err != nil {
		return fail(CodeInvalidSpec, state.StageCollect, true, "%v", err)
	}
	for _, a := range j.rec.Artifacts {
		if a.Key == key {
			return nil
		}
	}
	var art artifacts.Artifact
	for refusals := 0; ; refusals++ {
		if err := r.acquireCopy(ctx, j); err != nil {
			return err
		}
		if copying != nil {
			copying()
		}
		cctx, span := r.startSpan(ctx, "copy "+name, attribute.String("sluice.key", key))
		art, err = r.cfg.Store.Copy(cctx, key, r.cfg.MaxArtifactBytes, open)
		endSpan(span, err)
		r.releaseCopy()
		if !errors.Is(err, artifacts.ErrStoreRefused) {
			break
		}
		if err := r.waitForStore(ctx, j, refusals, fmt.Errorf("copy %s: %w", name, err)); err != nil {
			return err
		}
	}
	if err != nil {
		if f := artifactFailure(err); f != nil {
			return f
		}
		if j.stopping() {
			return errStopping
		}
		rt := transient(fmt.Errorf("copy %s: %w", name, err))
		rt.step = state.StatusCollecting
		return rt
	}
	r.cfg.Metrics.ArtifactBytes(j.kind, art.Size)
	j.log.Info().Str("key", art.Key).Int64("size", art.Size).Msg("artifact stored")
	if last || art.Size <= smallArtifact {
		j.pending = append(j.pending, art)
		return nil
	}
	if err := r.writeRetried(ctx, j, live, state.StatusCollecting, set(func(rec *state.Record) {
		rec.Artifacts = appendArtifact(rec.Artifacts, art)
	})); err != nil {
		return transient(err)
	}
	return nil
}

// storeRefusalBackoff spaces the copies of a job whose store refuses them.
var storeRefusalBackoff = backoff.Exponential{Min: time.Second, Max: 5 * time.Minute}

// waitForStore holds j, whose copy the store refused for a lasting reason
// (err, an artifacts.ErrStoreRefused: credentials revoked or expired, a
// policy, the bucket gone), before the copy is tried again; refusals
// counts the earlier ones in this delivery. The job keeps its message and
// its upstream result, and is never submitted again: the refusal goes
// into its last error (step collecting, code artifact_store_refused),
// whose since is kept across deliveries, and once StoreRefusalLimit has
// passed since then the job fails artifact_store_refused. A stop hands
// the job back (errStopping); its next delivery goes on counting from the
// same since. The job is held rather than redelivered because a worker
// whose store refuses takes no job (the store watch), so a redelivered
// one would wait unseen and never reach its limit.
func (r *Runner) waitForStore(ctx context.Context, j *job, refusals int, err error) error {
	return r.holdJob(ctx, j, storeHold, refusals, err)
}

// hold describes a wait for storage that refuses for a lasting reason:
// the artifact store (storeHold) or the platform's storage (roomHold).
type hold struct {
	code  string
	step  state.Status // "": the record's status
	stage state.Stage
	what  string // what refused, in the failure and the log
}

var (
	storeHold = hold{code: CodeStoreRefused, step: state.StatusCollecting, stage: state.StageCollect, what: "the artifact store refused the copies"}
	roomHold  = hold{code: CodeStorageFull, stage: state.StageSubmit, what: "the compute platform's storage stayed full"}
)

// holdJob holds j while h's storage refuses (err; n earlier refusals in
// this delivery), then lets the caller try again: the rule of
// waitForStore, for either storage. Past StoreRefusalLimit since the
// first refusal the job fails h.code.
func (r *Runner) holdJob(ctx context.Context, j *job, h hold, n int, err error) error {
	rt := &retry{err: err, step: h.step, code: h.code}
	note := r.stepError(j, rt)
	waited := r.cfg.Now().Sub(note.Since)
	if waited >= r.cfg.StoreRefusalLimit {
		return fail(h.code, h.stage, true,
			"%s for %s (SLUICE_STORE_REFUSAL_LIMIT=%s): %v",
			h.what, waited.Round(time.Second), r.cfg.StoreRefusalLimit, err)
	}
	delay := min(storeRefusalBackoff.Delay(n), r.cfg.StoreRefusalLimit-waited)
	if n == 0 {
		j.log.Warn().Err(err).Time("since", note.Since).Dur("limit", r.cfg.StoreRefusalLimit).
			Str("code", h.code).Msg("storage refuses for now; the job is held and tries again")
	}
	r.noteRetry(ctx, j, rt)
	r.pause(ctx, j, nil, delay)
	if j.stopping() || ctx.Err() != nil {
		return errStopping
	}
	return nil
}

// artifactFailure is the job failure of a permanent copy error, or nil for
// a transient one.
func artifactFailure(err error) *failure {
	switch {
	case errors.Is(err, artifacts.ErrTooLarge):
		return fail(CodeArtifactTooLarge, state.StageCollect, true, "%v", err)
	case errors.Is(err, artifacts.ErrStoreRefused):
		return fail(CodeStoreRefused, state.StageCollect, true, "%v", err)
	case artifacts.IsTemporary(err):
		return nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil
	}
	return fail(CodeArtifactFetchFailed, state.StageCollect, true, "%v", err)
}

func appendArtifact(list []state.Artifact, a state.Artifact) []state.Artifact {
	for i := range list {
		if list[i].Key == a.Key {
			list[i] = a
			return list
		}
	}
	return append(list, a)
}

// acquireCopy takes one of the worker's copy slots, or gives up with
// errStopping when the worker stops first.
func (r *Runner) acquireCopy(ctx context.Context, j *job) error {
	select {
	case r.copy <- struct{}{}:
		return nil
	case <-j.d.Stopping():
		return errStopping
	case <-ctx.Done():
		return errStopping
	}
}

func (r *Runner) releaseCopy() { <-r.copy }
