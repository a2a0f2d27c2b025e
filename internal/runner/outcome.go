package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/state"
)

// sluice's own error codes (docs/events.md#error-codes), used when upstream gave
// none.
const (
	CodeInvalidSpec          = "invalid_spec"
	CodeUpstreamUnavailable  = "upstream_unavailable"
	CodeUpstreamRejected     = "upstream_rejected"
	CodeSubmitAmbiguous      = "submit_ambiguous"
	CodeUpstreamFailed       = "upstream_failed"
	CodeTimeout              = "timeout"
	CodeArtifactTooLarge     = "artifact_too_large"
	CodeArtifactFetchFailed  = "artifact_fetch_failed"
	CodeStoreRefused         = "artifact_store_refused"
	CodeStorageFull          = "upstream_storage_full"
	CodeNoPermission         = "no_permission"
	CodeExitStatus           = "exit_status"
	CodeJobVanished          = "job_vanished"
	CodeWallTimeExceeded     = "wall_time_exceeded"
	CodeNodeFailure          = "node_failure"
	CodeTooManyDeliveries    = "too_many_deliveries"
	CodeQueueUnavailable     = "queue_unavailable"
	CodeInputFetchFailed     = "input_fetch_failed"
	CodeClusterNotFound      = "cluster_not_found"
	CodeUpstreamUnauthorized = "upstream_unauthorized"
	CodeInvalidMedia         = "invalid_media"
	CodeInputUnreachable     = "input_unreachable"
	CodeQuotaExhausted       = "upstream_quota_exhausted"
	// CodeConcurrencyConflict names, in a job's last error, a submit
	// refused for too many tasks at once; it never fails a job.
	CodeConcurrencyConflict = "upstream_concurrency_conflict"
	// CodeBudgetExhausted: the job's tenant spent its budget for the
	// period and its on_budget is fail (docs/tenants.md).
	CodeBudgetExhausted = "budget_exhausted"
)

// failure ends a job failed. deadLetter also copies its message to
// SLUICE_DLQ: sluice could not process it (bad spec, refused or ambiguous
// submit, artifacts that cannot be copied), as opposed to an upstream task
// that ran and failed.
type failure struct {
	code       string
	stage      state.Stage
	msg        string
	deadLetter bool
}

func (f *failure) Error() string { return fmt.Sprintf("%s at %s: %s", f.code, f.stage, f.msg) }

func fail(code string, stage state.Stage, deadLetter bool, format string, args ...any) *failure {
	return &failure{code: code, stage: stage, msg: fmt.Sprintf(format, args...), deadLetter: deadLetter}
}

// retry asks for a redelivery after a transient failure. The job's record
// keeps its step, so the next delivery resumes there.
type retry struct {
	err   error
	delay time.Duration // 0: the runner's backoff
	// step is the step retried when the record has left it already (a
	// submit backed out to "received"); "": the record's status. code is
	// sluice's code for the cause, if any. Both go into the record's last
	// error (noteRetry).
	step state.Status
	code string
}

func (r *retry) Error() string { return "transient: " + r.err.Error() }
func (r *retry) Unwrap() error { return r.err }

func transient(err error) *retry { return &retry{err: err} }

// errCancelled ends a job cancelled.
var errCancelled = errors.New("job cancelled")

// errStopping hands a job back because the worker is stopping.
var errStopping = errors.New("worker stopping")

// redelivery spaces the redeliveries of a job after transient failures.
var redelivery = backoff.Exponential{Min: 2 * time.Second, Max: 5 * time.Minute}

// retryDelay is the redelivery delay after the attempt-th transient failure:
// exponential from 2s to 5m, the upper half jittered.
func retryDelay(attempt int) time.Duration {
	return redelivery.HalfJitter(attempt - 1)
}
