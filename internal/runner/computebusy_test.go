package runner

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestComputeBusyUnpaidCallRedelivers answers the platform's internal
// error (10001, HTTP 200: busy) to every call of one unpaid step of a
// compute job's first delivery: the job is redelivered, not failed
// compute_10001, and nothing is submitted.
func TestComputeBusyUnpaidCallRedelivers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, endpoint := range []string{apisim.EndpointComputeUpload, apisim.EndpointComputeQueues} {
		t.Run(endpoint, func(t *testing.T) {
			id := "compute-busy-" + map[string]string{apisim.EndpointComputeUpload: "upload", apisim.EndpointComputeQueues: "queues"}[endpoint]
			spec := b.computeSpec(t, id)
			b.compute.AnswerBusy(endpoint, 1000)
			defer b.compute.AnswerBusy(endpoint, 0)
			out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 1))
			rec := b.record(t, id)
			if out.Action != consumer.Retry || rec.Status.Terminal() {
				t.Fatalf("settled %v, record %s (%+v), want a redelivery", out.Action, rec.Status, rec.Error)
			}
			if n := b.compute.SubmitCount(id); n != 0 {
				t.Fatalf("%d submits upstream, want none", n)
			}
		})
	}
}
