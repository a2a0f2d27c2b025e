package runner

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// A compute job whose shape its queue cannot run fails invalid_spec,
// naming the field and the limit, before anything is uploaded or
// submitted: nothing is paid and nothing is lost.
func TestComputeOverQueueLimitsFailsBeforeUpload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name string
		edit func(job map[string]any)
		want []string
	}{
		{"ppn", func(j map[string]any) { j["ppn"] = 128 }, []string{"compute.job.ppn: ppn 128 > queue normal's 64 cores per node"}},
		{"nodes", func(j map[string]any) { j["nodes"] = 20 }, []string{"compute.job.nodes: nodes 20 > queue normal's 16 nodes"}},
		{"gpus", func(j map[string]any) { j["gpus"] = 8 }, []string{"compute.job.gpus: gpus 8 > queue normal's 4 GPUs per node"}},
		{"dcus", func(j map[string]any) { j["queue"], j["dcus"] = "dcu", 5 }, []string{"compute.job.dcus: dcus 5 > queue dcu's 4 DCUs per node"}},
		{"wall time", func(j map[string]any) { j["wall_time"] = "96:00:00" }, []string{"compute.job.wall_time: wall_time 96:00:00 > queue normal's 72:00:00"}},
		{"extra", func(j map[string]any) {
			delete(j, "ppn")
			j["extra"] = map[string]string{"GAP_PPN": "128"}
		}, []string{"compute.job.extra.GAP_PPN: ppn 128 > queue normal's 64 cores per node"}},
		{"every breach at once", func(j map[string]any) { j["ppn"], j["wall_time"] = 128, "96:00:00" },
			[]string{"compute.job.ppn: ppn 128 > ", "compute.job.wall_time: wall_time 96:00:00 > "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id := "compute-shape-" + strings.ReplaceAll(tc.name, " ", "-")
			spec := b.computeSpec(t, id, tc.edit)
			out := b.r.Handle(testenv.Context(t, 30*time.Second), b.deliverKind(t, "compute", spec, 1))
			rec := b.record(t, id)
			if out.Action != consumer.DeadLetter || rec.Status != state.StatusFailed || rec.Error == nil || rec.Error.Code != CodeInvalidSpec {
				t.Fatalf("settled %v, record %s %+v, want failed invalid_spec, dead-lettered", out.Action, rec.Status, rec.Error)
			}
			for _, w := range tc.want {
				if !strings.Contains(rec.Error.Message, w) {
					t.Errorf("message %q does not say %q", rec.Error.Message, w)
				}
			}
		})
	}
	if n := b.compute.Counters().Requests(apisim.EndpointComputeUpload); n != 0 {
		t.Errorf("%d uploads, want none", n)
	}
	if n := b.compute.Counters().Requests(apisim.EndpointComputeSubmit); n != 0 {
		t.Errorf("%d submits, want none", n)
	}
}

// A job at its queue's limits runs.
func TestComputeAtQueueLimitsRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-shape-at-limits"
	spec := b.computeSpec(t, id, func(j map[string]any) {
		j["nodes"], j["ppn"], j["gpus"], j["wall_time"] = 16, 64, 4, "72:00:00"
	})
	out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 1))
	if rec := b.record(t, id); out.Action != consumer.Ack || rec.Status != state.StatusSucceeded {
		t.Fatalf("settled %v, record %s %+v, want succeeded", out.Action, rec.Status, rec.Error)
	}
}

// A queue whose limits cannot be read is not a refusal: the job goes on
// to its uploads and submit, and the platform judges its shape.
func TestComputeQueueLimitsUnreadable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		opt   func(*apisim.ComputeConfig)
		spoil func(*apisim.Compute)
	}{
		{"5xx", nil, func(c *apisim.Compute) {
			c.Faults().Set(apisim.EndpointComputeLimits, apisim.Fault{Error5xxRate: 1})
		}},
		{"200 with an error code", nil, func(c *apisim.Compute) { c.AnswerBusy(apisim.EndpointComputeLimits, 1000) }},
		{"404", func(c *apisim.ComputeConfig) { c.Letter = true }, func(*apisim.Compute) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []func(*apisim.ComputeConfig)
			if tc.opt != nil {
				opts = append(opts, tc.opt)
			}
			b := setup(t, opts...)
			tc.spoil(b.compute)
			b.platformJudges(t, "compute-limits-unread")
		})
	}
}

// platformJudges runs a compute job id whose ppn is over its queue's
// limit and checks that it went on to its uploads and one submit, which
// the platform refused: sluice did not judge it.
func (b *bundle) platformJudges(t *testing.T, id string) {
	t.Helper()
	spec := b.computeSpec(t, id, func(j map[string]any) { j["ppn"] = 128 })
	out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 1))
	rec := b.record(t, id)
	if out.Action != consumer.DeadLetter || rec.Error == nil || rec.Error.Code == CodeInvalidSpec {
		t.Fatalf("settled %v, record %s %+v, want the platform's refusal, not sluice's", out.Action, rec.Status, rec.Error)
	}
	if n := b.compute.Counters().Requests(apisim.EndpointComputeUpload); n == 0 {
		t.Error("no upload: the job did not go on")
	}
	if n := b.compute.Counters().Requests(apisim.EndpointComputeSubmit); n != 1 {
		t.Errorf("%d submits, want 1", n)
	}
}

// The limits read once serve every job of the region and queue's
// scheduler until they are stale; a failed read is tried again soon.
func TestQueueLimitsCache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := testenv.Context(t, 30*time.Second)
	for _, id := range []string{"compute-limits-one", "compute-limits-two"} {
		spec := b.computeSpec(t, id, func(j map[string]any) { j["ppn"] = 128 })
		if out := b.r.Handle(ctx, b.deliverKind(t, "compute", spec, 1)); out.Action != consumer.DeadLetter {
			t.Fatalf("%s settled %v, want dead-lettered", id, out.Action)
		}
	}
	reads := func() int64 { return b.compute.Counters().Requests(apisim.EndpointComputeLimits) }
	if n := reads(); n != 1 {
		t.Fatalf("%d limit reads for two jobs, want 1", n)
	}

	clock := testenv.NewClock()
	cache := newLimitsCache(clock.Now)
	sess, err := b.r.cfg.Compute.Cluster(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	get := func() error { _, err := cache.get(ctx, sess, "2001"); return err }
	for range 2 {
		if err := get(); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads(); n != 2 {
		t.Fatalf("%d limit reads, want 2 (one per cache)", n)
	}
	clock.Advance(limitsTTL + time.Second)
	b.compute.AnswerBusy(apisim.EndpointComputeLimits, 1000)
	if err := get(); err == nil {
		t.Fatal("a stale entry was served, want it read again (and fail)")
	}
	failed := reads()
	if err := get(); err == nil || reads() != failed {
		t.Fatalf("err %v, %d reads after %d: want the failed read kept a while", err, reads(), failed)
	}
	b.compute.AnswerBusy(apisim.EndpointComputeLimits, 0)
	clock.Advance(limitsRetry + time.Second)
	if err := get(); err != nil || reads() != failed+1 {
		t.Fatalf("err %v, %d reads after %d: want a failed read tried again", err, reads(), failed)
	}
}

// A DCU queue that refuses a job without a DCU (QOSMinGRES) fails it
// once, invalid_spec, saying what to change: nothing was created, and
// asking again would be refused again.
func TestComputeQOSMinGRESFailsClearly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-mingres"
	spec := b.computeSpec(t, id, func(j map[string]any) { j["queue"] = "dcu" })
	out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 1))
	rec := b.record(t, id)
	if out.Action != consumer.DeadLetter || rec.Status != state.StatusFailed || rec.Error == nil || rec.Error.Code != CodeInvalidSpec {
		t.Fatalf("settled %v, record %s %+v, want failed invalid_spec", out.Action, rec.Status, rec.Error)
	}
	for _, w := range []string{"compute.job.dcus", "QOSMinGRES", "GAP_NDCU"} {
		if !strings.Contains(rec.Error.Message, w) {
			t.Errorf("message %q does not say %q", rec.Error.Message, w)
		}
	}
	if n := b.compute.Counters().Requests(apisim.EndpointComputeSubmit); n != 1 {
		t.Errorf("%d submits, want 1", n)
	}
}

// checkShape reads the values the submit sends, whichever field set
// them, and compares each with the limit the queue gives.
func TestCheckShape(t *testing.T) {
	t.Parallel()
	one := 1
	tests := []struct {
		name string
		job  jobspec.ComputeJob
		lim  apiclient.Limits
		want string // "" passes
	}{
		{"no limits known", jobspec.ComputeJob{Queue: "q", Nodes: 99, PPN: 999, WallTime: "999:00:00"}, apiclient.Limits{}, ""},
		{"under the minimum nodes", jobspec.ComputeJob{Queue: "q", Nodes: 1, PPN: 4}, apiclient.Limits{MinNodes: 2},
			"compute.job.nodes: nodes 1 < queue q's minimum of 2 nodes"},
		{"over the queue's cores", jobspec.ComputeJob{Queue: "q", Nodes: 4, PPN: 32}, apiclient.Limits{MaxCores: 64},
			"compute.job.ppn: nodes x ppn 4 x 32 = 128 > queue q's 64 cores"},
		{"an extra value sluice cannot read", jobspec.ComputeJob{Queue: "q", Nodes: 1, Extra: map[string]string{"GAP_PPN": "lots", "GAP_WALL_TIME": "2 days"}},
			apiclient.Limits{MaxPPN: 4, MaxWallTime: time.Hour}, ""},
		{"gpus within", jobspec.ComputeJob{Queue: "q", Nodes: 1, PPN: 1, GPUs: &one}, apiclient.Limits{MaxGPUsPerNode: 1}, ""},
		{"wall time in days", jobspec.ComputeJob{Queue: "q", Nodes: 1, PPN: 1, WallTime: "25:00:00"}, apiclient.Limits{MaxWallTime: 24 * time.Hour},
			"compute.job.wall_time: wall_time 25:00:00 > queue q's 24:00:00"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := jobspec.Compute{Job: tc.job}
			f := checkShape(&c.Job, c.Request(jobspec.ComputeTarget{}).MapAppJobInfo, tc.lim)
			switch {
			case tc.want == "" && f != nil:
				t.Fatalf("failed: %v", f.msg)
			case tc.want != "" && (f == nil || f.code != CodeInvalidSpec || f.msg != tc.want):
				t.Fatalf("failure %+v, want invalid_spec %q", f, tc.want)
			}
		})
	}
}

// simSession starts a compute simulator alone and opens a session of
// its default region.
func simSession(t *testing.T) (*bundle, *apiclient.ClusterSession, context.Context) {
	t.Helper()
	b := &bundle{}
	client := b.startCompute(t)
	ctx := testenv.Context(t, 30*time.Second)
	sess, err := client.Cluster(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return b, sess, ctx
}

// A read cut by its caller (a stopping worker) says nothing about the
// platform: it is not kept, and the next job reads again.
func TestQueueLimitsCacheKeepsNoCutRead(t *testing.T) {
	t.Parallel()
	_, sess, ctx := simSession(t)
	cache := newLimitsCache(testenv.NewClock().Now)
	cut, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cache.get(cut, sess, "2001"); err == nil {
		t.Fatal("a read with an ended context succeeded")
	}
	if queues, err := cache.get(ctx, sess, "2001"); err != nil || len(queues) == 0 {
		t.Fatalf("queues %v, err %v: want the cut read forgotten and a new one", queues, err)
	}
}

// SLUICE_PREFLIGHT=off leaves the shape to the platform: the limits are
// not read, and the job goes on to its uploads and submit.
func TestComputePreflightOffSkipsQueueLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.r.cfg.Preflight = PreflightOff
	b.platformJudges(t, "compute-limits-off")
	if n := b.compute.Counters().Requests(apisim.EndpointComputeLimits); n != 0 {
		t.Errorf("%d limit reads, want none", n)
	}
}

// A limits read that never answers holds no job for long: the check is
// optional, its read has a budget of its own, and the job goes on to
// its uploads and submit.
func TestComputeQueueLimitsHung(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.r.limits.budget = time.Second
	b.compute.Faults().Set(apisim.EndpointComputeLimits, apisim.Fault{HangRate: 1})
	b.platformJudges(t, "compute-limits-hung")
}

// A job waiting for another job's read of the limits leaves when its own
// context ends, as every other wait of a job does.
func TestQueueLimitsWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	b := &bundle{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/userquotas/queues") {
				h.ServeHTTP(w, r)
				return
			}
			select {
			case arrived <- struct{}{}:
			default:
			}
			<-r.Context().Done() // never answered
		})
	}}
	client := b.startCompute(t)
	ctx := testenv.Context(t, 30*time.Second)
	sess, err := client.Cluster(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	cache := newLimitsCache(testenv.NewClock().Now)
	held, release := context.WithCancel(context.Background())
	holderDone := make(chan struct{})
	t.Cleanup(func() { release(); <-holderDone })
	go func() { defer close(holderDone); _, _ = cache.get(held, sess, "2001") }()
	<-arrived
	cut, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() { _, err := cache.get(cut, sess, "2001"); waited <- err }()
	cancel()
	select {
	case err := <-waited:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want the waiter's own context.Canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter stayed behind the hung read after its context ended")
	}
}

// plantLimits makes cache hold, read at its clock's now, queue normal of
// scheduler 2001 in region 1001 allowing at most ppn cores per node: the
// limits as the platform stated them when they were read.
func plantLimits(cache *limitsCache, ppn int) {
	cache.mu.Lock()
	defer cache.mu.Unlock()
	cache.m["1001/2001"] = &limitsRead{turn: make(chan struct{}, 1), at: cache.now(), queues: []apiclient.Queue{
		{QueueName: "normal", QueMaxPPN: strconv.Itoa(ppn), QueMaxNodect: "16", QueMaxWalltime: "72:00:00"},
	}}
}

// Limits read minutes ago may be gone (an operator raised them): a job
// is refused, which is for good, only against limits read just now.
func TestComputeStaleQueueLimitsRefuseNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	clock := testenv.NewClock()
	b.r.limits = newLimitsCache(clock.Now)
	plantLimits(b.r.limits, 2)
	clock.Advance(limitsTTL / 2)
	id := "compute-limits-raised"
	out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", b.computeSpec(t, id), 1))
	if rec := b.record(t, id); out.Action != consumer.Ack || rec.Status != state.StatusSucceeded {
		t.Fatalf("settled %v, record %s %+v, want succeeded (the queue takes ppn 4 now)", out.Action, rec.Status, rec.Error)
	}
	if n := b.compute.Counters().Requests(apisim.EndpointComputeLimits); n != 1 {
		t.Errorf("%d limit reads, want 1 (the stale read checked again)", n)
	}
}

// A job an earlier delivery submitted has had its shape judged by the
// platform, which took it: limits read since (lowered, or read wrong)
// must not cancel it.
func TestComputeSubmittedJobSkipsQueueLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-limits-after-submit"
	spec := b.computeSpec(t, id)
	b.submitEarlier(t, spec, "")
	plantLimits(b.r.limits, 2)
	out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 2))
	rec := b.record(t, id)
	if out.Action != consumer.Ack || rec.Status != state.StatusSucceeded || b.compute.SubmitCount(id) != 1 {
		t.Fatalf("settled %v, record %s %+v, %d submits: want the earlier job adopted and succeeded",
			out.Action, rec.Status, rec.Error, b.compute.SubmitCount(id))
	}
}

// The QOSMinGRES refusal names the field that set the job's DCUs, as
// every invalid_spec does, and says what the job asked: its advice must
// fit a job that set them through extra, or asked some already.
func TestComputeQOSMinGRESNamesTheField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := "compute-mingres-extra"
	spec := b.computeSpec(t, id, func(j map[string]any) {
		j["queue"], j["extra"] = "dcu", map[string]string{"GAP_NDCU": "0"}
	})
	out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 1))
	rec := b.record(t, id)
	if out.Action != consumer.DeadLetter || rec.Error == nil || rec.Error.Code != CodeInvalidSpec {
		t.Fatalf("settled %v, record %s %+v, want failed invalid_spec", out.Action, rec.Status, rec.Error)
	}
	for _, w := range []string{"compute.job.extra.GAP_NDCU:", "GAP_NDCU 0", "QOSMinGRES"} {
		if !strings.Contains(rec.Error.Message, w) {
			t.Errorf("message %q does not say %q", rec.Error.Message, w)
		}
	}
}
