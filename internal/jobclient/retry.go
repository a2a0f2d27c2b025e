package jobclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobqueue"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// LabelRetryOf is the label a retry carries: the id of the job it runs
// again (docs/cli.md#enqueue-retry).
const LabelRetryOf = contract.LabelRetryOf

// CodeSubmitAmbiguous is the error code of a job whose submission may or
// may not have reached upstream: running it again may pay twice.
const CodeSubmitAmbiguous = "submit_ambiguous"

// CodeStoreRefused is the error code of a job whose artifacts the store
// refused for longer than SLUICE_STORE_REFUSAL_LIMIT; its retry takes its
// upstream result over (see adoptUpstream).
const CodeStoreRefused = "artifact_store_refused"

// ErrNotRetryable is returned (wrapped, with the reason) by Retry for a
// job that has not ended, or that succeeded and Force was not given.
var ErrNotRetryable = errors.New("cannot retry")

// ErrMayPayTwice is returned (wrapped) by Retry and Replay for a job that
// ended submit_ambiguous, unless Force is given: upstream may have
// accepted the first submission, and a retry submits again.
var ErrMayPayTwice = errors.New("its submission may have reached upstream: running it again may pay twice")

// ErrSucceeded is returned (wrapped, with ErrNotRetryable) by Retry for a
// job that succeeded, unless Force is given.
var ErrSucceeded = errors.New("it succeeded")

// NeedsForce reports whether err refuses a run that Force would allow;
// each caller names its own way of giving it (enqueue's --force, the
// console's checkbox).
func NeedsForce(err error) bool {
	return errors.Is(err, ErrMayPayTwice) || errors.Is(err, ErrSucceeded)
}

// ErrSpecGone is returned (wrapped) by Retry when the job's spec is no
// longer kept (SLUICE_STATE_TTL has passed, or it was published before
// sluice kept specs).
var ErrSpecGone = errors.New("its spec is no longer kept (SLUICE_STATE_TTL)")

// maxRetries bounds the retry numbers looked at for a free X-r<N>.
const maxRetries = 1000

// RetryOptions tunes Retry and Replay.
type RetryOptions struct {
	// Force retries a succeeded job, and a job that ended
	// submit_ambiguous (which may pay twice).
	Force bool
	// AsTenant publishes the retry on its tenant's subject
	// (Submission.Tenant); a spec of a bound tenant goes there anyway.
	AsTenant bool
	// Tracer and Propagator trace the retry's publish as PublishOptions'
	// fields of the same names trace a job's: a producer span, a child of
	// the context's span, whose traceparent the retry's message carries
	// for the worker to link its trace to. Defaults to none: no span and
	// no header.
	Tracer     trace.TracerProvider
	Propagator propagation.TextMapPropagator
}

// RetryResult is the outcome of one Retry or Replay.
type RetryResult struct {
	// JobID is the job run again.
	JobID string `json:"job_id"`
	// RetryID is the new job, X-r<N>.
	RetryID string `json:"retry_id"`
	// Kind is the job's kind.
	Kind string `json:"kind"`
	// Duplicate reports that a retry with this id was already queued
	// (inside the jobs stream's duplicate window): nothing new was
	// queued.
	Duplicate bool `json:"duplicate"`
	// Sequence is the retry's message in SLUICE_JOBS.
	Sequence uint64 `json:"sequence"`
	// Reuses is the upstream task or compute job id the retry takes over
	// from the original instead of submitting again (see adoptUpstream);
	// "" when the retry submits.
	Reuses string `json:"reuses,omitempty"`
}

// Retry runs job id again as a new job X-r<N> with the original's spec,
// kind and labels plus retry_of: X (docs/cli.md#enqueue-retry). The job must
// have ended failed or cancelled; a succeeded job, or one that ended
// submit_ambiguous, needs o.Force. The original's record and events are
// left as they are.
func (c *Client) Retry(ctx context.Context, id string, o RetryOptions) (*RetryResult, error) {
	job, err := c.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := mayRunAgain(job, o); err != nil {
		return nil, err
	}
	specs, err := c.specs(ctx)
	if err != nil {
		return nil, err
	}
	spec, err := specs.Get(ctx, id)
	if errors.Is(err, state.ErrNoSpec) {
		return nil, fmt.Errorf("%w %s: %w", ErrNotRetryable, id, ErrSpecGone)
	}
	if err != nil {
		return nil, c.jsErr(err)
	}
	return c.rerun(ctx, id, job.Tenant, spec, o)
}

// mayRunAgain refuses to run job again (Retry, Replay) while it has not
// ended, or when it succeeded or ended submit_ambiguous and o.Force is not
// given: each would queue a second paid run beside or after the first.
func mayRunAgain(job *Job, o RetryOptions) error {
	switch {
	case !job.Terminal():
		return fmt.Errorf("%w %s: it has not ended (status %s); cancel it first or wait", ErrNotRetryable, job.ID, job.Status)
	case job.Status == string(state.StatusSucceeded) && !o.Force:
		return fmt.Errorf("%w %s: %w", ErrNotRetryable, job.ID, ErrSucceeded)
	case job.Error != nil && job.Error.Code == CodeSubmitAmbiguous && !o.Force:
		return fmt.Errorf("retry %s: %w", job.ID, ErrMayPayTwice)
	}
	return nil
}

// Spec returns job id's spec as received, or, while no worker has kept it
// yet (a job queued, or waiting for budget before its submit), its
// message as published in SLUICE_JOBS; else an error wrapping
// ErrSpecGone.
func (c *Client) Spec(ctx context.Context, id string) ([]byte, error) {
	specs, err := c.specs(ctx)
	if err != nil {
		return nil, err
	}
	spec, err := specs.Get(ctx, id)
	if !errors.Is(err, state.ErrNoSpec) {
		return spec, c.jsErr(err)
	}
	w, ferr := jobqueue.Find(ctx, c.js, id)
	if errors.Is(ferr, jobqueue.ErrNotWaiting) {
		return nil, fmt.Errorf("%s: %w", id, ErrSpecGone)
	}
	if ferr != nil {
		return nil, c.jsErr(ferr)
	}
	raw, err := c.js.Stream(ctx, contract.JobsStream)
	if err != nil {
		return nil, c.jsErr(err)
	}
	msg, err := raw.GetMsg(ctx, w.Seq)
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("read %s's message in %s: %w", id, contract.JobsStream, err))
	}
	return msg.Data, nil
}

// Retries returns the retries of job id that have a record, X-r1 first.
func (c *Client) Retries(ctx context.Context, id string) ([]Job, error) {
	store, err := c.stateStore(ctx, false)
	if err != nil {
		return nil, err
	}
	out := []Job{}
	for n := 1; n <= maxRetries; n++ {
		rec, _, err := store.Get(ctx, retryID(id, n))
		if errors.Is(err, state.ErrNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, c.jsErr(err)
		}
		out = append(out, JobFromRecord(rec))
	}
	return out, nil
}

// rerun publishes spec, the spec of job id as received, as id's next
// retry, traced as o says. tenant is the tenant id ran for, "" when
// unknown: a spec that arrived without one on a tenant subject took it
// from there, and its retry names it.
func (c *Client) rerun(ctx context.Context, id, tenant string, spec []byte, o RetryOptions) (*RetryResult, error) {
	n, err := c.nextRetry(ctx, id)
	if err != nil {
		return nil, err
	}
	rid := retryID(id, n)
	data, err := retrySpec(spec, rid, id, tenant)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrNotRetryable, id, err)
	}
	// Checked as the workers will check it: against the catalog in force.
	pub, _, err := c.Catalog(ctx)
	if err != nil {
		return nil, err
	}
	sub, err := NewSubmission(data, nil, pub.Catalog)
	if err != nil {
		return nil, fmt.Errorf("%w %s: its spec is invalid: %w", ErrNotRetryable, id, err)
	}
	if o.AsTenant {
		sub.Tenant = cmp.Or(SpecTenant(data), jobspec.DefaultTenant)
	}
	reuses, created, err := c.adoptUpstream(ctx, id, rid)
	if err != nil {
		return nil, err
	}
	res, err := c.Publish(ctx, []Submission{sub}, PublishOptions{Tracer: o.Tracer, Propagator: o.Propagator})
	if err == nil && res.Jobs[0].Err != nil {
		err = res.Jobs[0].Err
	}
	if err != nil {
		if created {
			c.dropAdopted(ctx, rid)
		}
		return nil, err
	}
	p := res.Jobs[0]
	return &RetryResult{JobID: id, RetryID: rid, Kind: string(sub.Kind), Duplicate: p.Duplicate, Sequence: p.Sequence, Reuses: reuses}, nil
}

// adoptUpstream lets retry rid take over the upstream result of job id
// when id failed artifact_store_refused: its task or compute job ended
// upstream, was paid for, and only the copy into the store was refused.
// rid's record is created before its message is published, at
// "submitted" with id's upstream ids, so that the worker that receives
// rid polls that task or job and copies its results, as it resumes any
// submitted job, instead of submitting again. It returns the id taken
// over and whether this call created the record (a retry prepared
// before, and maybe queued, is left as it is), or "" when rid is to submit: id failed otherwise, or has nothing
// to take over (a speech stream, which cannot be read again; synchronous
// speech, whose results were never a task to ask again; a container job,
// whose instance was deleted when it failed).
func (c *Client) adoptUpstream(ctx context.Context, id, rid string) (reuses string, created bool, err error) {
	store, err := c.stateStore(ctx, false)
	if err != nil {
		return "", false, err
	}
	orig, _, err := store.Get(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return "", false, nil // a dead letter of a job no worker recorded
	}
	if err != nil {
		return "", false, c.jsErr(err)
	}
	if reuses = adoptable(orig); reuses == "" {
		return "", false, nil
	}
	now := c.now().UTC()
	_, err = store.UpdateNew(ctx, rid, func(rec *state.Record) error {
		if prepared(rec) && rec.Upstream.TaskID == orig.Upstream.TaskID && rec.Upstream.JobID == orig.Upstream.JobID {
			created = false
			return state.Unchanged // this retry, prepared before and not received yet
		}
		if rec.Status != "" {
			return fmt.Errorf("%w %s: the retry %s has a record already", ErrNotRetryable, id, rid)
		}
		labels := maps.Clone(orig.Labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelRetryOf] = id
		created = true
		*rec = state.Record{
			JobID: rid, Kind: orig.Kind, Status: state.StatusSubmitted, Labels: labels,
			Upstream: orig.Upstream, Usage: orig.Usage,
			CreatedAt: now, SubmittedAt: orig.SubmittedAt,
		}
		return nil
	})
	if err != nil {
		return "", false, c.jsErr(fmt.Errorf("create the record of %s: %w", rid, err))
	}
	return reuses, created, nil
}

// prepared reports whether rec is a retry's record that adoptUpstream
// wrote and no worker has received yet.
func prepared(rec *state.Record) bool {
	return rec.Status == state.StatusSubmitted && rec.Attempts == 0 && rec.Labels[LabelRetryOf] != ""
}

// adoptable returns the upstream id a retry of orig takes over (see
// adoptUpstream), or "".
func adoptable(orig *state.Record) string {
	if orig.Status != state.StatusFailed || orig.Error == nil || orig.Error.Code != CodeStoreRefused || len(orig.Results) > 0 {
		return ""
	}
	switch orig.Kind {
	case "video", "speech":
		return orig.Upstream.TaskID
	case "compute":
		return orig.Upstream.JobID
	}
	return ""
}

// dropAdopted removes the record adoptUpstream created for rid when its
// message could not be published, so that the next retry is rid again.
// A failure leaves the record behind: the next retry then takes X-r<N+1>.
func (c *Client) dropAdopted(ctx context.Context, rid string) {
	if kv, err := c.js.KeyValue(ctx, contract.StateBucket); err == nil {
		_ = kv.Delete(ctx, rid)
	}
}

func retryID(id string, n int) string { return id + "-r" + strconv.Itoa(n) }

// nextRetry returns the first N whose X-r<N> no worker has seen. A retry
// published but not yet received has neither record nor spec: publishing
// it again is caught by the jobs stream's duplicate window, and reported
// as a duplicate instead of queuing a second retry.
func (c *Client) nextRetry(ctx context.Context, id string) (int, error) {
	store, err := c.stateStore(ctx, false)
	if err != nil {
		return 0, err
	}
	specs, err := c.specs(ctx)
	if err != nil {
		return 0, err
	}
	for n := 1; n <= maxRetries; n++ {
		rid := retryID(id, n)
		if !jobspec.ValidID(rid) {
			return 0, fmt.Errorf("%w %s: the retry id %s is longer than a job id may be", ErrNotRetryable, id, rid)
		}
		rec, _, err := store.Get(ctx, rid)
		if err == nil && prepared(rec) {
			return n, nil // queued already: publishing it again is a duplicate
		}
		if errors.Is(err, state.ErrNotFound) {
			if _, err = specs.Get(ctx, rid); errors.Is(err, state.ErrNoSpec) {
				return n, nil
			}
		}
		if err != nil {
			return 0, c.jsErr(err)
		}
	}
	return 0, fmt.Errorf("%w %s: it has %d retries already", ErrNotRetryable, id, maxRetries)
}

// retrySpec returns spec with its id set to rid and the label retry_of set
// to orig; every other member keeps its value.
func retrySpec(spec []byte, rid, orig, tenant string) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(spec, &doc); err != nil || doc == nil {
		return nil, errors.New("its spec is not a JSON object")
	}
	if _, named := doc["tenant"]; !named && tenant != "" && tenant != jobspec.DefaultTenant {
		doc["tenant"], _ = json.Marshal(tenant)
	}
	labels := map[string]string{}
	if raw, ok := doc["labels"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &labels); err != nil {
			return nil, fmt.Errorf("its labels are not an object of strings: %w", err)
		}
	}
	labels[LabelRetryOf] = orig
	var err error
	if doc["labels"], err = json.Marshal(labels); err != nil {
		return nil, err
	}
	if doc["id"], err = json.Marshal(rid); err != nil {
		return nil, err
	}
	return json.Marshal(doc)
}

// specs opens SLUICE_SPECS; a missing bucket is ErrNotSetUp.
func (c *Client) specs(ctx context.Context) (*state.Specs, error) {
	kv, err := c.js.KeyValue(ctx, contract.SpecsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w (bucket %s does not exist)", ErrNotSetUp, contract.SpecsBucket)
	}
	if err != nil {
		return nil, c.jsErr(fmt.Errorf("open bucket %s: %w", contract.SpecsBucket, err))
	}
	return state.NewSpecs(kv), nil
}
