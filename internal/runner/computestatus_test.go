package runner

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// requestsTo sums the simulator's requests to endpoint, whatever their
// answer.
func (b *bundle) requestsTo(endpoint string) int64 {
	var n int64
	for k, v := range b.compute.Counters().Snapshot() {
		if strings.HasPrefix(k, "requests:"+endpoint+":") {
			n += v
		}
	}
	return n
}

// runComputeJobs runs compute jobs ids at once to their end and checks
// each succeeded with its output after one submit.
func (b *bundle) runComputeJobs(t *testing.T, ids ...string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, id := range ids {
		spec := b.computeSpec(t, id)
		d := b.deliverKind(t, "compute", spec, 1)
		wg.Go(func() {
			if out := b.r.Handle(testenv.Context(t, 60*time.Second), d); out.Action != consumer.Ack {
				t.Errorf("%s settled %v, want an ack", id, out.Action)
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		rec := b.record(t, id)
		if rec.Status != state.StatusSucceeded || !hasArtifact(rec, "result.dat") {
			t.Errorf("%s: record %+v, want succeeded with result.dat", id, rec)
		}
		if n := b.compute.SubmitCount(id); n != 1 {
			t.Errorf("%s: %d submits upstream, want 1", id, n)
		}
	}
}

// Running compute jobs read their status from the region's realtime list,
// one walk for all of them, and ask their own detail only when the list
// does not show them running or queued: around the submit and at the
// end. The outcome is today's.
func TestComputeStatusFromTheRegionList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := []string{"cstatus-a", "cstatus-b", "cstatus-c", "cstatus-d"}
	b.runComputeJobs(t, ids...)
	details, lists := b.requestsTo(apisim.EndpointComputeJob), b.requestsTo(apisim.EndpointComputeJobs)
	// Each job runs ~6 s polled every 100 ms: ~60 polls each, ~240 in
	// all, of which a few per job need the detail.
	if details > int64(8*len(ids)) {
		t.Errorf("%d job detail requests for %d jobs (list walks: %d), want at most %d", details, len(ids), lists, 8*len(ids))
	}
	t.Logf("%d jobs: %d detail requests, %d list requests", len(ids), details, lists)
}

// Whatever the list answers, a running job ends as it would without it,
// after one submit: a list route missing (read job by job), a list that
// answers 10001, a list that keeps showing an ended job the detail has
// dropped (the platform's list keeps it ~5 minutes).
func TestComputeStatusListFailuresKeepTheOutcome(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		opt   func(*apisim.ComputeConfig)
		setup func(*bundle)
	}{
		{"no route", nil, func(b *bundle) {
			b.compute.Faults().Set(apisim.EndpointComputeJobs, apisim.Fault{NoRouteRate: 1})
		}},
		{"10001", nil, func(b *bundle) { b.compute.AnswerBusy(apisim.EndpointComputeJobs, 1_000_000) }},
		{"page lost", nil, func(b *bundle) {
			b.compute.Faults().Set(apisim.EndpointComputeJobs, apisim.Fault{Error5xxRate: 0.3})
		}},
		{"ended job stays listed", func(c *apisim.ComputeConfig) { c.HistoryDelay = time.Millisecond }, func(*bundle) {}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var opts []func(*apisim.ComputeConfig)
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			b := setup(t, opts...)
			tt.setup(b)
			b.runComputeJobs(t, "cstatus-"+strings.ReplaceAll(tt.name, " ", "-"))
		})
	}
}
