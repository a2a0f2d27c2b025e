// Package runner runs one job from its message to its terminal event: it
// decodes the spec, reads the job's checkpoint, drives the upstream API of
// the job's kind, copies the results to S3 and publishes the events, and
// tells the consumer how to settle the message. Every step is checkpointed
// in SLUICE_STATE first, so a redelivered job resumes instead of paying
// upstream twice.
package runner

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/gopool"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/metrics"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/quota"
	"github.com/sluice-dev/sluice/internal/reach"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/tenants"
	"github.com/sluice-dev/sluice/internal/watchdog"
	"github.com/sluice-dev/sluice/internal/webhooks"
)

// Config wires a Runner.
type Config struct {
	// State is the checkpoint store. Required.
	State *state.Store
	// Specs keeps each job's spec as received, for retries. Defaults to
	// keeping none (tests of the runner alone).
	Specs *state.Specs
	// Events publishes events. Required.
	Events *events.Publisher
	// Media is the media API client; nil fails video and speech jobs with
	// upstream_unavailable.
	Media *apiclient.Media
	// Poller batches media task queries. Required when Media is set.
	Poller *Poller
	// Compute is the compute platform client; nil fails compute jobs with
	// upstream_unavailable.
	Compute *apiclient.Compute
	// JS publishes a pipeline's steps and its cancel notices to them;
	// nil fails pipelines (docs/pipelines.md).
	JS jetstream.JetStream
	// Store copies artifacts to S3. Required.
	Store *artifacts.Store
	// Fetcher downloads result and input URLs. Required.
	Fetcher *artifacts.Fetcher
	// Cancels routes cancel requests to running jobs. Required.
	Cancels *Cancels
	// WebhookPolicy refuses a spec's notify.webhook.url that the worker
	// must not send to (private, or plain http in production). Defaults
	// to the strictest policy.
	WebhookPolicy webhooks.URLPolicy
	// Watchdog, when set, watches every job's step (watch.go).
	Watchdog *watchdog.Watchdog
	// StepMinDeadline is the least deadline the watchdog gives a step
	// before the paid submit. Defaults to DefaultStepMinDeadline.
	StepMinDeadline time.Duration
	// MaxDeliver fails a job delivered more often than this. Defaults to 20.
	MaxDeliver int
	// MaxArtifactBytes bounds one artifact. Defaults to 5 GiB.
	MaxArtifactBytes int64
	// TaskTimeout bounds a media task from submit to terminal. Defaults to 6h.
	TaskTimeout time.Duration
	// SubmitTimeout bounds one paid submit or create call (media,
	// compute, container), and then, with a budget of its own, the lookup
	// and the write of what it returned. Defaults to 2m.
	SubmitTimeout time.Duration
	// QuotaRetry is how long after a media submit answered with an
	// exhausted quota (HTTP 433) the job is submitted again, the spacing
	// doubling up to an hour (QuotaRetry when longer). Defaults to 5m.
	QuotaRetry time.Duration
	// QuotaWait bounds the time from a job's first 433 to its last retry:
	// past it, the job fails upstream_quota_exhausted. Defaults to 24h.
	QuotaWait time.Duration
	// StoreRefusalLimit bounds how long a job waits for an artifact store
	// that refuses its copies (artifacts.ErrStoreRefused: credentials,
	// policy, bucket), counted from the first refusal: past it, the job
	// fails artifact_store_refused. Defaults to 4h.
	StoreRefusalLimit time.Duration
	// ComputeTimeout bounds a compute job from submit to terminal. Defaults
	// to 168h.
	ComputeTimeout time.Duration
	// ComputePoll is the compute job poll interval. Defaults to 30s.
	ComputePoll time.Duration
	// PresignTTL is the lifetime of presigned input URLs. Defaults to 1h.
	PresignTTL time.Duration
	// StateTTL is how long a record outlives its last write
	// (SLUICE_STATE_TTL): a compute job waiting longer than a quarter of
	// it without news writes its record again. Defaults to 720h.
	StateTTL time.Duration
	// Preflight is PreflightStrict or PreflightOff (SLUICE_PREFLIGHT).
	// Defaults to PreflightStrict.
	Preflight string
	// PreflightConcurrency bounds the media inputs probed at once across
	// every job. Defaults to 8.
	PreflightConcurrency int
	// CopyConcurrency bounds large artifact copies running at once, as the
	// Store's MaxUploads does its large uploads; up to four times as many
	// copies run at once in all, the small ones among them (see
	// artifacts.StoreConfig.SmallSize): the runner lets that many start,
	// and the Store holds each large one at its upload slots. Defaults to 4.
	CopyConcurrency int
	// Pool runs the goroutines of waiting jobs (wait.go); share it with the
	// consumer's. Defaults to a pool of its own.
	Pool *gopool.Pool
	// Quota holds the fleet's upstream quotas: a lease before each paid
	// submit, given back once the task is terminal. Optional (no limit).
	Quota *quota.Fleet
	// Models is the model catalog video specs are checked against.
	// Defaults to the shipped catalog.
	Models *models.Catalog
	// Tenants is the budget ledger over the live SLUICE_TENANTS view: a
	// reservation before each paid submit a price table covers, settled
	// with the job's cost when it ends (docs/tenants.md). Optional (no
	// budgets, no costs).
	Tenants *tenants.Ledger
	// Tracer starts the spans of a job's steps (decode and validate,
	// preflight, the wait, each artifact copy) under the delivery's
	// process span. Defaults to the no-op provider.
	Tracer trace.TracerProvider
	// Metrics is optional.
	Metrics *metrics.Metrics
	// Reach hears how checkpoints retried until written and terminal
	// event publishes went. Optional.
	Reach *reach.Watch
	// Logger defaults to a disabled logger.
	Logger *zerolog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// Sleep waits out the runner's retry spacings and poll intervals, or
	// returns ctx's error when ctx ends first: with Now, the one clock the
	// runner measures durations by. Defaults to backoff.Sleep.
	Sleep func(context.Context, time.Duration) error
}

// The defaults of Config that are also the worker's: internal/config
// takes the default of each variable that sets one of these fields from
// here, so each is stated once.
const (
	DefaultMaxDeliver           = 20
	DefaultMaxArtifactBytes     = artifacts.DefaultMaxBytes
	DefaultTaskTimeout          = 6 * time.Hour
	DefaultQuotaRetry           = 5 * time.Minute
	DefaultQuotaWait            = 24 * time.Hour
	DefaultStoreRefusalLimit    = 4 * time.Hour
	DefaultComputeTimeout       = 168 * time.Hour
	DefaultComputePoll          = 30 * time.Second
	DefaultPresignTTL           = time.Hour
	DefaultCopyConcurrency      = 4
	DefaultPreflightConcurrency = 8
)

// Runner implements consumer.Handler for every kind.
type Runner struct {
	cfg    Config
	log    zerolog.Logger
	tracer trace.Tracer
	copy   chan struct{}
	// checkpoints and publishes report to cfg.Reach.
	checkpoints, publishes *reach.Loop
	// probes bounds the media inputs probed at once (preflight.go).
	probes chan struct{}
	// limits keeps the compute queues' limits (queuelimits.go).
	limits *limitsCache
	// sightings measure how long records left to another delivery stay
	// unchanged (begin).
	sightings *sightings

	// waiting are the jobs detached while their task runs (wait.go);
	// stopWatched are the stop channels a goroutine watches for them.
	waitMu      sync.Mutex
	waiting     map[*waiter]struct{}
	stopWatched map[<-chan struct{}]bool
}

// New returns a Runner.
func New(cfg Config) (*Runner, error) {
	if cfg.State == nil || cfg.Events == nil || cfg.Store == nil || cfg.Fetcher == nil || cfg.Cancels == nil {
		return nil, errors.New("runner: State, Events, Store, Fetcher and Cancels are required")
	}
	if cfg.Media != nil && cfg.Poller == nil {
		return nil, errors.New("runner: Poller is required with Media")
	}
	cfg.MaxDeliver = cmp.Or(cfg.MaxDeliver, DefaultMaxDeliver)
	cfg.MaxArtifactBytes = cmp.Or(cfg.MaxArtifactBytes, DefaultMaxArtifactBytes)
	cfg.TaskTimeout = cmp.Or(cfg.TaskTimeout, DefaultTaskTimeout)
	cfg.SubmitTimeout = cmp.Or(cfg.SubmitTimeout, submitTimeout)
	cfg.QuotaRetry = cmp.Or(cfg.QuotaRetry, DefaultQuotaRetry)
	cfg.QuotaWait = cmp.Or(cfg.QuotaWait, DefaultQuotaWait)
	cfg.StoreRefusalLimit = cmp.Or(cfg.StoreRefusalLimit, DefaultStoreRefusalLimit)
	cfg.ComputeTimeout = cmp.Or(cfg.ComputeTimeout, DefaultComputeTimeout)
	cfg.ComputePoll = cmp.Or(cfg.ComputePoll, DefaultComputePoll)
	cfg.PresignTTL = cmp.Or(cfg.PresignTTL, DefaultPresignTTL)
	cfg.StateTTL = cmp.Or(cfg.StateTTL, contract.DefaultStateTTL)
	cfg.CopyConcurrency = cmp.Or(cfg.CopyConcurrency, DefaultCopyConcurrency)
	cfg.Preflight = cmp.Or(cfg.Preflight, PreflightStrict)
	if cfg.Preflight != PreflightStrict && cfg.Preflight != PreflightOff {
		return nil, fmt.Errorf("runner: Preflight is %q, want %q or %q", cfg.Preflight, PreflightStrict, PreflightOff)
	}
	cfg.PreflightConcurrency = cmp.Or(cfg.PreflightConcurrency, DefaultPreflightConcurrency)
	if cfg.Models == nil {
		cfg.Models = models.Shipped()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Sleep == nil {
		cfg.Sleep = backoff.Sleep
	}
	if cfg.Pool == nil {
		cfg.Pool = gopool.New(0)
	}
	if cfg.Logger == nil {
		l := zerolog.Nop()
		cfg.Logger = &l
	}
	if cfg.Tracer == nil {
		cfg.Tracer = noop.NewTracerProvider()
	}
	return &Runner{
		cfg: cfg, log: *cfg.Logger, tracer: cfg.Tracer.Tracer(tracerName),
		copy:        make(chan struct{}, 4*cfg.CopyConcurrency),
		probes:      make(chan struct{}, cfg.PreflightConcurrency),
		limits:      newLimitsCache(cfg.Now),
		sightings:   newSightings(),
		checkpoints: cfg.Reach.Loop("state writes"), publishes: cfg.Reach.Loop("event publishes"),
		waiting: make(map[*waiter]struct{}), stopWatched: make(map[<-chan struct{}]bool),
	}, nil
}

// job is one delivery of one job being run.
type job struct {
	id     string
	kind   string
	spec   *jobspec.Spec
	d      *consumer.Delivery
	rec    *state.Record
	log    zerolog.Logger
	cancel <-chan struct{}
	// watch is the watchdog's view of the job's step (watch.go).
	watch *watchdog.Job
	// unregister ends the cancel notices of cancel.
	unregister func()
	start      time.Time
	// attempt is the record's Attempts as this delivery set it: a record
	// with more has been taken over by another delivery (see claimSubmit).
	attempt int
	// pending are artifacts stored but not recorded yet, and unrecorded
	// what a poll saw of the finished task: the job's next write of its
	// record, the terminal one at the latest, records them (see update and
	// copyArtifact). Nothing needs them before: a job that stops first
	// asks upstream again and copies its artifacts again.
	pending    []state.Artifact
	unrecorded func(*state.Record)
	// lease is the job's hold on the fleet's quota while its task is
	// upstream (quota.go); claimed: the job asked for it, or dropped the
	// place the consumer reserved for it.
	lease   *quota.Lease
	claimed bool
	// reservation is the job's budget reservation (budget.go), recorded
	// by its submit's claim.
	reservation *state.Reservation
	// unseenTask: a submit's answer was lost, so a task may run upstream
	// that this job will never poll (settleQuota).
	unseenTask bool
	// unwritten: rec is the job's first record, not written yet (see
	// firstWriteCreates); the job's first write creates it.
	unwritten bool
}

// Handle runs the job in d: message → spec → upstream → artifacts → event,
// and returns how to settle the message. A media job whose task runs
// upstream is detached while it waits (see waitTask): Handle returns
// consumer.Detach, and the job settles its message when it ends.
func (r *Runner) Handle(ctx context.Context, d *consumer.Delivery) consumer.Outcome {
	ctx, watch := r.watch(ctx, d)
	bctx, span := r.startSpan(ctx, "decode and validate")
	j, out, done := r.begin(bctx, d)
	span.End()
	if j != nil {
		j.watch = watch
	}
	if done {
		j.unregister()
		r.settleQuota(j, out)
		return out
	}
	r.resumeStep(j)
	r.markScheduler(ctx, j)
	switch j.kind {
	case "video", "speech":
		pctx, span := r.startSpan(ctx, "preflight")
		err := r.preflight(pctx, j)
		endSpan(span, err)
		if err != nil {
			return r.end(ctx, j, err)
		}
		wait, err := r.runMedia(ctx, j)
		if wait {
			return r.waitTask(ctx, j)
		}
		return r.end(ctx, j, err)
	case "compute":
		return r.end(ctx, j, r.runCompute(ctx, j))
	case "container":
		return r.end(ctx, j, r.runContainer(ctx, j))
	case "pipeline":
		return r.end(ctx, j, r.runPipeline(ctx, j))
	}
	return r.end(ctx, j, fail(CodeInvalidSpec, state.StageValidate, true, "kind %q is not served", j.kind))
}

// end finishes j with the result of its run and ends its cancel notices.
func (r *Runner) end(ctx context.Context, j *job, runErr error) consumer.Outcome {
	defer j.unregister()
	out := r.finish(ctx, j, runErr)
	r.settleQuota(j, out)
	return out
}

// jobID picks the job's id: the spec's, else a valid Nats-Msg-Id, else
// js-<stream sequence> (docs/job-spec.md). A message admitted to a class
// queue carries the id its admission resolved so (Sluice-Job-Id).
func jobID(spec *jobspec.Spec, d *consumer.Delivery) string {
	specID := ""
	if spec != nil {
		specID = spec.ID
	}
	return jobspec.JobID(specID, contract.MessageID(d.Msg.Subject(), d.Msg.Headers()), d.StreamSeq())
}

// strayMessage explains why a message on a subject that no consumer
// serves failed (the consumer's sweep hands such messages over).
func strayMessage(subject, kind string) string {
	if kind == contract.KindUnknown {
		return fmt.Sprintf("subject %s is served by no worker: publish a job to %s<kind> with kind %s",
			subject, contract.JobsSubjectPrefix, strings.Join(contract.Kinds, ", "))
	}
	return fmt.Sprintf("subject %s is served by no worker: publish a %s job to %s", subject, kind, contract.JobSubject(kind))
}

func specMessage(err error) string {
	var se *jobspec.Error
	if errors.As(err, &se) {
		return se.Error()
	}
	return err.Error()
}

func submittedOrLater(s state.Status) bool { return s.Active() }

func stageOf(s state.Status) state.Stage {
	switch s {
	case state.StatusSubmitted, state.StatusRunning:
		return state.StagePoll
	case state.StatusCollecting:
		return state.StageCollect
	case state.StatusReceived, "":
		return state.StageValidate
	}
	return state.StageSubmit
}

// finish turns a kind runner's result into the job's end: the terminal
// record and event for success, failure and cancellation; a redelivery for
// transient failures and stops.
func (r *Runner) finish(ctx context.Context, j *job, err error) consumer.Outcome {
	var f *failure
	var rt *retry
	switch {
	case err == nil:
		return r.terminal(ctx, j, state.StatusSucceeded, nil)
	case errors.As(err, &f):
		j.log.Warn().Str("code", f.code).Str("stage", string(f.stage)).Str("error", f.msg).Msg("job failed")
		return r.terminal(ctx, j, state.StatusFailed, f)
	case errors.Is(err, errCancelled):
		return r.terminal(ctx, j, state.StatusCancelled, nil)
	case errors.Is(err, errStopping):
		j.log.Info().Str("status", string(j.rec.Status)).Msg("handing job back on shutdown")
		return consumer.Outcome{Action: consumer.Release}
	case errors.As(err, &rt):
	default:
		rt = transient(err)
	}
	r.noteRetry(ctx, j, rt)
	return r.settle(j, rt)
}

func (r *Runner) settle(j *job, rt *retry) consumer.Outcome {
	if errors.Is(rt.err, errNotFresh) {
		j.log.Info().Err(rt.err).Msg("nothing was submitted; reading the record at the next delivery")
		return consumer.Outcome{Action: consumer.Retry, Delay: notFreshDelay}
	}
	delay := rt.delay
	if delay == 0 {
		if ra, ok := apiclient.RetryAfterOf(rt.err); ok {
			delay = ra
		} else {
			attempt := 1
			if j.rec != nil {
				attempt = j.rec.Attempts
			}
			delay = retryDelay(attempt)
		}
	}
	j.log.Warn().Err(rt.err).Dur("retry_in", delay).Msg("transient failure; job will be redelivered")
	r.cfg.Metrics.JobRetried(j.kind)
	return consumer.Outcome{Action: consumer.Retry, Delay: delay}
}

// terminal writes the job's terminal record with its event, publishes the
// event and returns Ack (or DeadLetter).
func (r *Runner) terminal(ctx context.Context, j *job, status state.Status, f *failure) consumer.Outcome {
	now := r.cfg.Now().UTC()
	err := r.write(ctx, j, ending(status), "", func(rec *state.Record) error {
		rec.Kind = cmp.Or(rec.Kind, j.kind)
		if status == state.StatusCancelled && unrecordedSubmit(rec) {
			rec.Note = NoteSubmitMayHaveHappened
		}
		rec.Status = status
		rec.FinishedAt = &now
		rec.TerminalSeq = j.d.StreamSeq()
		rec.LastError = nil
		if f != nil {
			rec.Error = &state.Error{Code: f.code, Message: f.msg, Stage: f.stage}
			rec.DeadLetter = f.deadLetter
		}
		rec.Cost = r.jobCost(j, rec)
		ev, err := json.Marshal(events.FromRecord(rec, status, now))
		if err != nil {
			return err
		}
		rec.TerminalEvent = ev
		return nil
	})
	if err != nil {
		return r.settle(j, transient(fmt.Errorf("record terminal state: %w", err)))
	}
	r.cfg.Metrics.JobFinished(j.kind, string(j.rec.Status), r.cfg.Now().Sub(j.start))
	if e := j.rec.Error; e != nil {
		r.cfg.Metrics.JobFailed(j.kind, e.Code, string(e.Stage))
	}
	return r.republish(ctx, j)
}

// republish publishes the terminal event stored in the record (a duplicate
// inside the window is dropped by the server) and settles the message.
// The event is published by the message that ended the job (the record's
// TerminalSeq), whose ack then waits for the server's confirmation: a
// confirmed ack removes the message for good, so the event is not
// published again. A copy of the spec published again publishes nothing,
// nor does a delivery after the record shows the stream holds the event:
// the stream would drop it, but every core subscriber would see it a
// second time.
func (r *Runner) republish(ctx context.Context, j *job) consumer.Outcome {
	rec := j.rec
	if len(rec.TerminalEvent) == 0 {
		ev, _ := json.Marshal(events.FromRecord(rec, rec.Status, r.cfg.Now()))
		rec.TerminalEvent = ev
	}
	if err := r.settleBudget(ctx, j); err != nil {
		return r.settle(j, transient(err))
	}
	own := rec.TerminalSeq == j.d.StreamSeq()
	switch {
	case rec.TerminalEventStored:
		j.log.Info().Str("status", string(rec.Status)).Msg("job finished")
		return settled(j, own, nil)
	case !own && rec.TerminalSeq != 0:
		j.log.Info().Str("status", string(rec.Status)).Uint64("terminal_seq", rec.TerminalSeq).
			Msg("job finished by another message of it, which publishes its terminal event")
		return settled(j, false, nil)
	}
	if err := r.publishTerminal(ctx, j); err != nil {
		return r.settle(j, transient(err))
	}
	j.log.Info().Str("status", string(rec.Status)).Msg("job finished")
	if !own || rec.DeadLetter || j.d.Orphaned() {
		// Only a note stops a second publish: the record is an older
		// worker's (no TerminalSeq), a dead letter is terminated without
		// a confirmation, and a message the sweep handed over may be one
		// acknowledged already whose deletion lagged.
		r.markEventStored(ctx, j)
		return settled(j, own, nil)
	}
	return settled(j, own, func(ctx context.Context) { r.markEventStored(ctx, j) })
}

// publishTerminal publishes the terminal event stored in j's record. An
// events stream without space for it holds the job until it has (the
// record keeps the event meanwhile), rather than handing it back to be
// delivered again and again.
func (r *Runner) publishTerminal(ctx context.Context, j *job) error {
	rec := j.rec
	id := contract.EventID(j.id, string(rec.Status))
	for attempt := 0; ; attempt++ {
		err := r.cfg.Events.PublishRaw(ctx, rec.Kind, string(rec.Status), id, rec.TerminalEvent)
		if err == nil {
			r.publishes.OK()
			return nil
		}
		r.publishes.Fail(err)
		if !natsconn.NoSpace(err) || !r.awaitSpace(ctx, j, err, attempt) {
			return err
		}
	}
}

// settled is the outcome of finished job j: a dead letter, or an ack
// (confirmed when unconfirmed is not nil, which runs if no confirmation
// comes). Only the message that ended the job (own, or any message of an
// older worker's record, which names none) is dead-lettered: a later copy
// of a dead-lettered job is acknowledged, or each copy would add a letter,
// and each letter replay as another paid retry.
func settled(j *job, own bool, unconfirmed func(context.Context)) consumer.Outcome {
	rec := j.rec
	if rec.DeadLetter && (own || rec.TerminalSeq == 0) {
		reason := "job failed"
		if rec.Error != nil {
			reason = rec.Error.Code + ": " + rec.Error.Message
		}
		return consumer.Outcome{Action: consumer.DeadLetter, Reason: reason, JobID: j.id}
	}
	return consumer.Outcome{Action: consumer.Ack, Unconfirmed: unconfirmed}
}

// markEventStored records that SLUICE_EVENTS acknowledged j's terminal
// event. A failure only costs a second publish if the job is delivered
// again (the stream drops it as a duplicate), so it is logged, not retried.
func (r *Runner) markEventStored(ctx context.Context, j *job) {
	err := r.writeOnce(ctx, j, finished, "", func(rec *state.Record) error {
		if rec.TerminalEventStored {
			return state.Unchanged
		}
		rec.TerminalEventStored = true
		return nil
	})
	if err != nil {
		j.log.Warn().Err(err).Msg("cannot record that the stream holds the terminal event; a redelivery publishes it again")
	}
}

// cancelled reports whether a cancel was requested for j, by notice or in
// its last record.
func (j *job) cancelled() bool {
	select {
	case <-j.cancel:
		return true
	default:
		return j.rec != nil && j.rec.Cancel != nil
	}
}

// stopping reports whether the worker is stopping.
func (j *job) stopping() bool {
	select {
	case <-j.d.Stopping():
		return true
	default:
		return false
	}
}
