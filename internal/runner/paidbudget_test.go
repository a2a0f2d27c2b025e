package runner

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// holdPaidAnswer lets the first paid call that matches (method, path
// part) act on the platform, then holds its answer until the caller
// gives up: the answer of a call that took its whole budget.
func (b *bundle) holdPaidAnswer(t *testing.T, method, part string) {
	t.Helper()
	held := &atomic.Bool{}
	b.frontCompute(t, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != method || !strings.Contains(r.URL.Path, part) || held.Swap(true) {
			return false
		}
		b.compute.ServeHTTP(httptest.NewRecorder(), r)
		<-r.Context().Done()
		return true
	})
}

// TestComputeSubmitTakingItsBudgetIsAdopted: a compute submit the
// platform acted on, whose answer does not come within the submit's
// budget (SubmitTimeout), is looked for and recorded with a budget of its
// own: the job is not failed submit_ambiguous for want of time, nor
// submitted twice.
func TestComputeSubmitTakingItsBudgetIsAdopted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.r.cfg.SubmitTimeout = 2 * time.Second
	b.holdPaidAnswer(t, http.MethodPost, "/apptemplates/")
	id := "compute-slow-submit"
	out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", b.computeSpec(t, id), 1))
	if rec := b.record(t, id); out.Action != consumer.Ack || rec.Status != state.StatusSucceeded {
		t.Fatalf("settled %v, record %s (%+v), want success of the job the slow submit created", out.Action, rec.Status, rec.Error)
	}
	if n := b.compute.SubmitCount(id); n != 1 {
		t.Fatalf("%d submits upstream, want 1", n)
	}
}

// TestContainerCreateTakingItsBudgetIsAdopted: a container create the
// platform acted on, whose answer does not come within the create's
// budget, is looked for by name and recorded with a budget of its own,
// not handed back at "submitting" for want of time.
func TestContainerCreateTakingItsBudgetIsAdopted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.r.cfg.SubmitTimeout = 2 * time.Second
	b.holdPaidAnswer(t, http.MethodPost, "/instance-service/task")
	id := "container-slow-create"
	ctx := testenv.Context(t, 60*time.Second)
	j := b.begun(t, "container", containerSpec(id, "echo slow\n"), 1)
	defer j.unregister()
	sess, err := b.r.openSession(ctx, j, "", "", "open region session")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.r.createInstance(ctx, j, sess, b.r.workDir(j, sess)); err != nil {
		t.Fatalf("createInstance: %v; want the created instance recorded", err)
	}
	if rec := b.record(t, id); rec.Status != state.StatusSubmitted || rec.Upstream.InstanceID == "" {
		t.Fatalf("record %s (%+v), want the instance recorded", rec.Status, rec.Upstream)
	}
	if alive := b.compute.ContainerAlive(); len(alive) != 1 {
		t.Fatalf("instances alive: %v, want the one created", alive)
	}
}
