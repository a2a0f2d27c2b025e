package runner

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// verdict is what a delivery does with its job, decided on the job's
// record as read (decide).
type verdict uint8

const (
	// verdictRun: the delivery counts and runs the job.
	verdictRun verdict = iota
	// verdictFinished: the job ended; its stored terminal event is
	// published unless that was done.
	verdictFinished
	// verdictBusy: an orphan (a message the sweep handed over, without a
	// lease) of a job whose record this worker has not yet seen unchanged
	// for an AckWait (another delivery may hold it): left to it.
	verdictBusy
	// verdictInSubmit: another delivery is inside its paid submit (see
	// paying): left to it for an AckWait, without a write that would fence
	// it out.
	verdictInSubmit
	// verdictHeldCopy: a copy, on a subject no consumer serves, of a job a
	// worker holds: only the copy is dead-lettered.
	verdictHeldCopy
	// verdictStray: a message on a subject no consumer serves fails.
	verdictStray
	// verdictBadSpec: a spec that does not decode fails.
	verdictBadSpec
	// verdictTooMany: delivered more often than SLUICE_MAX_DELIVER.
	verdictTooMany
	// verdictCancelled: a cancel came before the submit.
	verdictCancelled
	// verdictRefused: the job's tenant does not accept it from where it
	// came or at its priority (tenants.Settings.Refusal).
	verdictRefused
)

// counts reports whether the delivery is written into the record
// (countDelivery) before it acts.
func (v verdict) counts() bool {
	return v != verdictFinished && v != verdictBusy && v != verdictInSubmit && v != verdictHeldCopy
}

// arrival is what begin knows of a delivery besides its record and spec.
type arrival struct {
	// stray: on a subject no consumer serves (the sweep hands those over).
	stray bool
	// orphaned: handed over by the sweep (consumer.Delivery.Orphaned).
	orphaned bool
	// ackWait is the consumers' AckWait.
	ackWait time.Duration
	// delivered is the message's delivery count.
	delivered int
	// published is when the stream stored the message (zero: unknown).
	published time.Time
	// badSpec: the spec did not decode.
	badSpec bool
	// maxDeliver is SLUICE_MAX_DELIVER.
	maxDeliver int
	// refused says why the job's tenant refuses it ("" when it does not).
	refused string
}

func arrivalOf(d *consumer.Delivery, specErr error, maxDeliver int, refused string) arrival {
	return arrival{
		stray: !contract.Served(d.Msg.Subject()), orphaned: d.Orphaned(), ackWait: d.AckWait(),
		delivered: int(d.NumDelivered()), published: d.Published(), badSpec: specErr != nil, maxDeliver: maxDeliver,
		refused: refused,
	}
}

// decide is begin's decision on the job's record as read (rec, not nil:
// a fresh one when none exists), which this worker has seen unchanged for
// quiet (sightings: never longer than since it was written, whatever the
// writer's clock). The checks after the first four see the record as the
// delivery would write it (countDelivery).
func decide(rec *state.Record, a arrival, spec *jobspec.Spec, quiet time.Duration) verdict {
	open := rec.Status != "" && !rec.Status.Terminal()
	switch {
	case rec.Status.Terminal():
		return verdictFinished
	case a.orphaned && open && quiet < a.ackWait:
		return verdictBusy
	case a.stray && open:
		return verdictHeldCopy
	case paying(rec, spec) && quiet < 2*a.ackWait:
		return verdictInSubmit
	}
	next := *rec
	countDelivery(&next, a, spec)
	switch {
	case a.stray:
		return verdictStray
	case a.badSpec:
		return verdictBadSpec
	case a.refused != "" && !submittedOrLater(next.Status) && !upstream(&next):
		// Decided before anything is paid for only: a job upstream when
		// its tenant was bound goes on.
		return verdictRefused
	case a.deliveries(&next)-next.QuotaWaits-next.BudgetWaits-next.ConflictWaits > a.maxDeliver:
		return verdictTooMany
	case next.Cancel != nil && !submittedOrLater(next.Status) && next.Upstream.TaskID == "":
		// (A media task whose id reached the record is cancelled upstream.)
		return verdictCancelled
	}
	return verdictRun
}

// countDelivery writes a delivery that goes on into the record: one more
// attempt, the spec's labels, "received" for a job not seen before. A
// cancel recorded before the job existed, long before this message was
// published, is not this job's and is dropped.
func countDelivery(rec *state.Record, a arrival, spec *jobspec.Spec) {
	if rec.Status == "" && rec.Cancel != nil && !state.PendingCancelApplies(rec, a.published) {
		rec.Cancel = nil
	}
	rec.Attempts++
	if spec != nil && spec.Labels != nil {
		rec.Labels = spec.Labels
	}
	if spec != nil {
		rec.Tenant, rec.Priority = spec.EffectiveTenant(), spec.EffectivePriority()
	}
	if rec.Status == "" {
		rec.Status = state.StatusReceived
	}
}

// deliveries is how often a job has been delivered: its message's count,
// or, for an orphan, which the sweep hands over as a first delivery every
// time, the record's count of the deliveries that reached a worker (this
// one included), so that SLUICE_MAX_DELIVER also bounds a job handed over
// again and again (a handler that panics on it). The caller subtracts the
// deliveries that waited for upstream's quota (see quotaExhausted), its
// concurrency (concurrencyConflict) or the tenant's budget.
func (a arrival) deliveries(rec *state.Record) int {
	if a.orphaned {
		return max(a.delivered, rec.Attempts)
	}
	return a.delivered
}

// begin decodes d's spec, registers the job for cancel notices and
// records the delivery in the job's state record. done reports that out
// settles the message already (see verdict, or no state); the caller must
// call j.unregister either way.
func (r *Runner) begin(ctx context.Context, d *consumer.Delivery) (j *job, out consumer.Outcome, done bool) {
	spec, specErr := jobspec.DecodeWith(d.Msg.Data(), jobspec.Kind(d.Kind), r.cfg.Models)
	arrivedFor := contract.ArrivedFor(d.Msg.Subject(), d.Msg.Headers())
	specErr = forTenantSubject(spec, specErr, arrivedFor)
	specErr = r.checkNotify(spec, specErr)
	spared := spareable(d, spec, specErr, arrivedFor)
	j = &job{kind: d.Kind, spec: spec, d: d, start: r.cfg.Now()}
	j.id = jobID(spec, d)
	j.log = r.log.With().Str("job_id", j.id).Str("kind", j.kind).Logger()
	if spec != nil && spec.Video != nil && spec.Video.Model != "" && !spec.Video.ModelKnown(r.cfg.Models) {
		j.log.Warn().Str("model", spec.Video.Model).Msg(LogUnknownModel)
	}

	// Register for cancel notices before reading the record: a cancel
	// either is in the record read below or is noticed after it.
	j.cancel, j.unregister = r.cfg.Cancels.register(j.id)

	a := arrivalOf(d, specErr, r.cfg.MaxDeliver, r.refusal(spec, specErr, arrivedFor))
	now := r.cfg.Now()
	if r.firstWriteCreates(j, a, specErr) {
		j.rec = &state.Record{JobID: j.id, Kind: j.kind, CreatedAt: now.UTC(), Status: state.StatusReceived, Attempts: 1, Labels: spec.Labels,
			Tenant: spec.EffectiveTenant(), Priority: spec.EffectivePriority()}
		j.unwritten = true
		out, done := r.started(ctx, j)
		return j, out, done
	}
	var v verdict
	var spare bool
	rec, err := r.put(ctx, view{id: j.id, fresh: true}, admitted, "", func(rec *state.Record) error {
		rec.Kind = cmp.Or(rec.Kind, j.kind)
		a, spec := a, spec
		if spare = spared != nil && upstream(rec); spare {
			a.badSpec, spec = false, spared
		}
		if v = decide(rec, a, spec, r.quiet(j.id, rec)); !v.counts() {
			return state.Unchanged
		}
		countDelivery(rec, a, spec)
		return nil
	})
	if err != nil {
		r.checkpoints.Fail(err)
		j.log.Warn().Err(err).Msg("cannot read job state; retrying later")
		return j, r.settle(j, transient(err)), true
	}
	r.checkpoints.OK()
	if spare {
		j.log.Warn().Str("spec_error", specMessage(specErr)).Msg(LogSpared)
		j.spec, specErr = spared, nil
	}
	if v != verdictBusy && v != verdictInSubmit {
		r.sightings.forget(j.id)
	}
	j.rec = rec
	if v == verdictFinished || v == verdictBusy || v == verdictInSubmit {
		j.attempt = rec.Attempts
		j.log = j.log.With().Int("attempt", rec.Attempts).Logger()
	} else if out, done := r.started(ctx, j); done {
		return j, out, true
	}
	if rec.Upstream.TaskID != "" {
		j.log = j.log.With().Str("task_id", rec.Upstream.TaskID).Str("request_id", rec.Upstream.RequestID).Logger()
	}
	if v == verdictRun {
		return j, consumer.Outcome{}, false
	}
	return j, r.settleVerdict(ctx, j, v, a, specErr), true
}

// quiet is how long this worker has seen rec, the record of job id, as
// it is (sightings), for a record of a job under way; zero for others,
// whose verdict does not depend on it.
func (r *Runner) quiet(id string, rec *state.Record) time.Duration {
	if rec.Status == "" || rec.Status.Terminal() {
		return 0
	}
	return r.sightings.unchanged(id, rec, r.cfg.Now())
}

// settleVerdict ends a delivery whose verdict is not to run its job.
func (r *Runner) settleVerdict(ctx context.Context, j *job, v verdict, a arrival, specErr error) consumer.Outcome {
	rec, subject := j.rec, j.d.Msg.Subject()
	switch v {
	case verdictFinished:
		j.log.Info().Str("status", string(rec.Status)).Bool("event_stored", rec.TerminalEventStored).Uint64("terminal_seq", rec.TerminalSeq).
			Msg("job already finished; its terminal event is published unless the stream holds it or another message ended the job")
		return r.republish(ctx, j)
	case verdictBusy:
		j.log.Info().Time("updated_at", rec.UpdatedAt).Str("worker", rec.Worker).Str("status", string(rec.Status)).
			Msg("orphaned job message: another delivery wrote the job's record within a lease; leaving the job to it")
		return consumer.Outcome{Action: consumer.Retry, Delay: a.ackWait}
	case verdictInSubmit:
		j.log.Warn().Time("updated_at", rec.UpdatedAt).Str("worker", rec.Worker).Str("status", string(rec.Status)).
			Msg(LogLeftInSubmit)
		return consumer.Outcome{Action: consumer.Retry, Delay: a.ackWait}
	case verdictHeldCopy:
		msg := strayMessage(subject, j.kind) + "; job " + j.id + " is already held by a worker, which goes on with it"
		j.log.Warn().Str("subject", subject).Msg("copy of a held job on a subject no worker serves; dead-lettering the copy")
		return consumer.Outcome{Action: consumer.DeadLetter, Reason: CodeInvalidSpec + ": " + msg, JobID: j.id}
	case verdictStray:
		return r.finish(ctx, j, fail(CodeInvalidSpec, state.StageValidate, true, "%s", strayMessage(subject, j.kind)))
	case verdictBadSpec:
		return r.finish(ctx, j, fail(CodeInvalidSpec, state.StageValidate, true, "%s", specMessage(specErr)))
	case verdictRefused:
		return r.finish(ctx, j, fail(CodeTenantRefused, state.StageValidate, true, "%s", a.refused))
	case verdictTooMany:
		return r.finish(ctx, j, r.settleEnd(ctx, j, fail(CodeTooManyDeliveries, stageOf(rec.Status), true,
			"delivered %d times, more than the limit of %d (SLUICE_MAX_DELIVER)", a.deliveries(rec), a.maxDeliver)))
	case verdictCancelled:
		j.log.Info().Msg("job cancelled before it was submitted")
		return r.finish(ctx, j, r.settleEnd(ctx, j, errCancelled))
	}
	return consumer.Outcome{}
}

// started keeps j's spec and takes its attempt from j.rec, for a delivery
// that goes on with the job.
func (r *Runner) started(ctx context.Context, j *job) (consumer.Outcome, bool) {
	if r.cfg.Specs != nil {
		// Kept before anything is paid for, so that every job that may
		// have run upstream can be retried by its id alone.
		if err := r.cfg.Specs.Keep(ctx, j.id, j.d.Msg.Data()); err != nil {
			j.log.Warn().Err(err).Msg("cannot keep the job's spec; retrying later")
			return r.settle(j, transient(err)), true
		}
	}
	j.attempt = j.rec.Attempts
	j.log = j.log.With().Int("attempt", j.rec.Attempts).Logger()
	return consumer.Outcome{}, false
}

// notFreshDelay is how soon a job that backed out of creating its record
// (errNotFresh) is delivered again.
const notFreshDelay = 100 * time.Millisecond

// firstWriteCreates reports whether j, at its first delivery, can go
// without the "received" write: its record is made up here (attempt 1,
// received) and created by its first write, the "submitting" claim before
// the paid submit. That saves a write per job and weakens no fence: the
// create fails if any record exists (a cancel that came first, the same
// job id published again, another delivery), and the job then backs out
// before paying anything (errNotFresh) and is redelivered at once to take
// the usual way, which reads the record. Only media jobs with nothing to
// probe and no fleet quota to wait for go this way: those reach their
// claim within milliseconds, so that no status reader misses a "received"
// that lasts.
func (r *Runner) firstWriteCreates(j *job, a arrival, specErr error) bool {
	return j.d.NumDelivered() == 1 && !j.d.Orphaned() && !a.stray && a.refused == "" && specErr == nil && r.cfg.Quota == nil &&
		(j.kind == "speech" || j.kind == "video") && !r.hasProbes(j)
}

// spareable returns d's video spec checked for its structure alone when
// only the model catalog refuses it (specErr): a job the catalog took
// when it was submitted goes on, if its record shows it upstream, after
// the catalog changed. nil otherwise.
func spareable(d *consumer.Delivery, spec *jobspec.Spec, specErr error, arrivedFor string) *jobspec.Spec {
	if specErr == nil || spec == nil || spec.Video == nil {
		return nil
	}
	s, err := jobspec.DecodeWith(d.Msg.Data(), jobspec.Kind(d.Kind), nil)
	if forTenantSubject(s, err, arrivedFor) != nil {
		return nil
	}
	return s
}

// upstream reports whether rec shows its job's paid submit sent: a
// submit under way or done, or an upstream task.
func upstream(rec *state.Record) bool {
	return rec.Status == state.StatusSubmitting || rec.Submits > 0 || rec.Upstream.TaskID != ""
}

// LogSpared is logged for a job whose spec the model catalog now refuses
// but which is upstream already: it goes on (spareable).
const LogSpared = "spec no longer fits the model catalog, but the job is upstream already: it goes on"

// LogUnknownModel is logged, with the model's name, for a video whose
// model the catalog does not name: it was checked against the catalog's
// default entry (docs/job-spec.md#the-model-catalog).
const LogUnknownModel = "video model not in the model catalog; checked against its default entry"

// LogLeftInSubmit is logged by a delivery that leaves its job to another
// delivery inside its paid submit (see paying).
const LogLeftInSubmit = "another delivery of the job is inside its paid submit; leaving the job to it for a lease"

// paying reports whether rec shows a delivery inside its paid submit: the
// record at "submitting" (the submit sent, its answer not recorded yet),
// or a speech stream being read ("collecting" without its audio stored).
// A redelivery comes while the first delivery is still there when that
// one could not extend its lease (a consumer leader's election, a worker
// cut off a while). Such a record is left alone until the worker the
// job is delivered to has seen it unchanged for two leases on its own
// clock (sightings), whatever the clock of the worker that wrote it: the
// first delivery records its task or stream meanwhile, and no second one
// is paid for (or, for a stream, failed unread); a worker that died
// inside the window is not heard from again, and a later delivery, to a
// worker that has seen the record unchanged that long, submits again as
// before.
func paying(rec *state.Record, spec *jobspec.Spec) bool {
	switch rec.Status {
	case state.StatusSubmitting:
		return true
	case state.StatusCollecting:
		return len(rec.Artifacts) == 0 && spec != nil && spec.Speech != nil &&
			spec.Speech.EffectiveMode() == jobspec.ModeStream
	}
	return false
}

// checkNotify adds to specErr the worker's refusal of the spec's
// notify.webhook.url (a private address, or plain http in production):
// such a job is an invalid spec like any other (docs/webhooks.md).
func (r *Runner) checkNotify(spec *jobspec.Spec, specErr error) error {
	if spec == nil || spec.Notify == nil || spec.Notify.Webhook == nil || spec.Notify.Webhook.URL == "" {
		return specErr
	}
	refused := r.cfg.WebhookPolicy.CheckURL(spec.Notify.Webhook.URL)
	if refused == nil {
		return specErr
	}
	p := jobspec.Problem{Path: "notify.webhook.url", Rule: strings.TrimPrefix(refused.Error(), webhooks.ErrRefusedURL.Error()+": ")}
	var e *jobspec.Error
	if !errors.As(specErr, &e) {
		return &jobspec.Error{Problems: []jobspec.Problem{p}}
	}
	if !slices.ContainsFunc(e.Problems, func(q jobspec.Problem) bool { return q.Path == p.Path }) {
		e.Problems = append(e.Problems, p)
	}
	return e
}
