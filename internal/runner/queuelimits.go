package runner

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// limitsTTL is how long one read of a scheduler's queue limits serves
// every job of its region: limits change when operators change them,
// rarely. limitsRetry is how long a failed read stands before a job
// reads again: long enough that a burst of jobs does not hammer a route
// that is away, short enough that the check comes back soon.
// limitsBudget bounds one read, retries included: the check is optional,
// and the jobs of the region wait for it, so a route that answers late
// costs them seconds, not the client's minutes of retries.
const (
	limitsTTL    = 10 * time.Minute
	limitsRetry  = 30 * time.Second
	limitsBudget = 15 * time.Second
)

// limitsCache keeps the queue limits read per region and scheduler, for
// the whole worker. Safe for concurrent use; jobs asking for one key at
// once share one read.
type limitsCache struct {
	now func() time.Time
	// budget bounds one read (limitsBudget); zero leaves it to the
	// caller's context.
	budget time.Duration
	mu     sync.Mutex
	m      map[string]*limitsRead
}

// limitsRead is one key's last read. turn holds a token while a job reads
// or looks: a channel rather than a mutex, so that a job waiting its turn
// leaves when its context ends.
type limitsRead struct {
	turn   chan struct{}
	at     time.Time
	queues []apiclient.Queue
	err    error
}

func newLimitsCache(now func() time.Time) *limitsCache {
	return &limitsCache{now: now, budget: limitsBudget, m: make(map[string]*limitsRead)}
}

// get returns the queue limits of scheduler schedID in sess's region:
// the last read while fresh (limitsTTL; limitsRetry for a failed one),
// else a new one within c.budget. A read cut by ctx is not kept; a read
// over its budget is kept as a failed one.
func (c *limitsCache) get(ctx context.Context, sess *apiclient.ClusterSession, schedID string) ([]apiclient.Queue, error) {
	return c.read(ctx, sess, schedID, limitsTTL)
}

// recent is get for limits read at most limitsRetry ago: what a refusal,
// which is for good, rests on.
func (c *limitsCache) recent(ctx context.Context, sess *apiclient.ClusterSession, schedID string) ([]apiclient.Queue, error) {
	return c.read(ctx, sess, schedID, limitsRetry)
}

// read returns the last read younger than maxAge (limitsRetry at most
// for a failed one), else a new one.
func (c *limitsCache) read(ctx context.Context, sess *apiclient.ClusterSession, schedID string, maxAge time.Duration) ([]apiclient.Queue, error) {
	key := sess.ClusterID() + "/" + schedID
	c.mu.Lock()
	e := c.m[key]
	if e == nil {
		e = &limitsRead{turn: make(chan struct{}, 1)}
		c.m[key] = e
	}
	c.mu.Unlock()

	select {
	case e.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-e.turn }()
	ttl := maxAge
	if e.err != nil {
		ttl = min(ttl, limitsRetry)
	}
	if !e.at.IsZero() && c.now().Sub(e.at) < ttl {
		return e.queues, e.err
	}
	rctx := ctx
	if c.budget > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, c.budget)
		defer cancel()
	}
	queues, err := sess.QueueLimits(rctx, schedID)
	if ctx.Err() != nil {
		// Cut by the caller (a stopping worker): it says nothing about
		// the platform, and the next job reads again.
		return nil, err
	}
	e.queues, e.err, e.at = queues, err, c.now()
	return queues, err
}

// checkLimits fails j, invalid_spec, when the job the submit would send
// (info) breaks its queue's limits: before any upload, so such a job
// costs nothing. Limits that cannot be read, or a queue they do not list,
// refuse nothing: the platform judges at submit. A job is refused only
// against limits read at most limitsRetry ago: a refusal is for good, and
// an operator may have raised a limit since the kept read.
// SLUICE_PREFLIGHT=off leaves the judging to the platform too, and so
// does a record at "submitting": an earlier submit may have made a job
// the platform took, which a refusal here would cancel.
func (r *Runner) checkLimits(ctx context.Context, j *job, sess *apiclient.ClusterSession, schedID string, info map[string]any) error {
	if r.cfg.Preflight == PreflightOff || j.rec.Status == state.StatusSubmitting {
		return nil
	}
	queue, _ := info[apiclient.KeyQueue].(string)
	var f *failure
	for _, read := range []func(context.Context, *apiclient.ClusterSession, string) ([]apiclient.Queue, error){r.limits.get, r.limits.recent} {
		queues, err := read(ctx, sess, schedID)
		if err != nil && (j.stopping() || ctx.Err() != nil) {
			return errStopping
		}
		if err != nil {
			j.log.Warn().Err(err).Str("queue", queue).Msg(LogLimitsUnread)
			return nil
		}
		if f = shapeFailure(j, queues, info); f == nil {
			return nil
		}
	}
	return f
}

// shapeFailure is checkShape against the entry of queues that names the
// job's queue; nil when none does.
func shapeFailure(j *job, queues []apiclient.Queue, info map[string]any) *failure {
	queue, _ := info[apiclient.KeyQueue].(string)
	for _, q := range queues {
		if q.Name() == queue {
			return checkShape(&j.spec.Compute.Job, info, q.Limits())
		}
	}
	j.log.Debug().Str("queue", queue).Msg("the queue limits do not list the job's queue; submitting it unchecked")
	return nil
}

// LogLimitsUnread is logged when a compute job's queue limits cannot be
// read: the job is submitted without the check.
const LogLimitsUnread = "queue limits unreadable; the platform judges the job's shape at submit"

// checkShape compares the values the submit sends (info, the spec's
// fields with extra applied) with the queue's limits l, and returns the
// failure naming every one that breaks a limit, or nil. A value sluice
// cannot read, or a limit l does not know, is not checked.
func checkShape(job *jobspec.ComputeJob, info map[string]any, l apiclient.Limits) *failure {
	queue, _ := info[apiclient.KeyQueue].(string)
	nodes, _ := intValue(info, apiclient.KeyNNode)
	ppn, _ := intValue(info, apiclient.KeyPPN)
	var breaks []string
	add := func(key, name, format string, args ...any) {
		breaks = append(breaks, specField(job, key, name)+": "+fmt.Sprintf(format, args...))
	}
	switch {
	case l.MaxNodes > 0 && nodes > l.MaxNodes:
		add(apiclient.KeyNNode, "nodes", "nodes %d > queue %s's %d nodes", nodes, queue, l.MaxNodes)
	case l.MinNodes > 0 && nodes > 0 && nodes < l.MinNodes:
		add(apiclient.KeyNNode, "nodes", "nodes %d < queue %s's minimum of %d nodes", nodes, queue, l.MinNodes)
	}
	switch {
	case l.MaxPPN > 0 && ppn > l.MaxPPN:
		add(apiclient.KeyPPN, "ppn", "ppn %d > queue %s's %d cores per node", ppn, queue, l.MaxPPN)
	case l.MaxCores > 0 && nodes > 0 && nodes*ppn > l.MaxCores:
		add(apiclient.KeyPPN, "ppn", "nodes x ppn %d x %d = %d > queue %s's %d cores", nodes, ppn, nodes*ppn, queue, l.MaxCores)
	}
	if n, ok := intValue(info, apiclient.KeyNGPU); ok && l.MaxGPUsPerNode > 0 && n > l.MaxGPUsPerNode {
		add(apiclient.KeyNGPU, "gpus", "gpus %d > queue %s's %d GPUs per node", n, queue, l.MaxGPUsPerNode)
	}
	if n, ok := intValue(info, apiclient.KeyNDCU); ok && l.MaxDCUsPerNode > 0 && n > l.MaxDCUsPerNode {
		add(apiclient.KeyNDCU, "dcus", "dcus %d > queue %s's %d DCUs per node", n, queue, l.MaxDCUsPerNode)
	}
	wall, _ := info[apiclient.KeyWallTime].(string)
	if d, ok := apiclient.ParseWallTime(wall); ok && l.MaxWallTime > 0 && d > l.MaxWallTime {
		add(apiclient.KeyWallTime, "wall_time", "wall_time %s > queue %s's %s", strings.TrimSpace(wall), queue, apiclient.FormatWallTime(l.MaxWallTime))
	}
	if len(breaks) == 0 {
		return nil
	}
	return fail(CodeInvalidSpec, state.StageValidate, true, "%s", strings.Join(breaks, "; "))
}

// minGRESFailure is the failure of a job its queue's scheduler refused
// for asking fewer DCUs or GPUs than the queue's minimum (ErrMinGRES, err):
// the spec's to change. It names the field that set the job's DCUs and
// what the job asked (info, as sent), since the minimum is not shown.
func minGRESFailure(job *jobspec.ComputeJob, info map[string]any, err error) *failure {
	queue, _ := info[apiclient.KeyQueue].(string)
	asked := func(key string) string {
		if n, ok := intValue(info, key); ok {
			return strconv.Itoa(n)
		}
		return "none"
	}
	return fail(CodeInvalidSpec, state.StageSubmit, true,
		"%s: queue %s's scheduler refused the job for asking fewer DCUs or GPUs than its minimum (QOSMinGRES; the job asks %s %s, %s %s): ask more DCUs (or GPUs on a GPU queue), or choose another queue: %v",
		specField(job, apiclient.KeyNDCU, "dcus"), queue, apiclient.KeyNDCU, asked(apiclient.KeyNDCU), apiclient.KeyNGPU, asked(apiclient.KeyNGPU), err)
}

// specField names the spec field that set mapAppJobInfo key: job.extra's
// entry when extra carries it, else the friendly name.
func specField(job *jobspec.ComputeJob, key, name string) string {
	if _, ok := job.Extra[key]; ok {
		return "compute.job.extra." + key
	}
	return "compute.job." + name
}

// intValue reads a mapAppJobInfo count (a string, as sent); false when
// it is empty or not a non-negative integer.
func intValue(info map[string]any, key string) (int, bool) {
	s, _ := info[key].(string)
	n, err := strconv.Atoi(strings.TrimSpace(s))
	return n, err == nil && n >= 0
}
