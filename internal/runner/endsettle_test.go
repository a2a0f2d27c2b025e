package runner

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// frontCompute points the runner at the compute simulator through a
// front: intercept answers a request itself when it returns true.
func (b *bundle) frontCompute(t *testing.T, intercept func(w http.ResponseWriter, r *http.Request) bool) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !intercept(w, r) {
			b.compute.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	client, err := apiclient.NewCompute(apiclient.ComputeConfig{BaseURL: srv.URL, User: "alice", Password: "pw-compute", OrgID: "org-1"})
	if err != nil {
		t.Fatal(err)
	}
	b.r.cfg.Compute = client
}

// refuseLogins answers the next n region logins (the center route) with
// the platform's "permission denied" (HTTP 200, code 10008): a refusal.
func (b *bundle) refuseLogins(t *testing.T, n int64) {
	t.Helper()
	left := &atomic.Int64{}
	left.Store(n)
	b.frontCompute(t, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/ac/openapi/v2/center" || left.Add(-1) < 0 {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"code":"10008","msg":"permission denied","data":null}`))
		return true
	})
}

// createEarlier plays a first delivery of container job spec that
// claimed its create and sent it, then stopped before recording the
// answer: the record is at "submitting" and the instance is alive.
func (b *bundle) createEarlier(t *testing.T, id string, spec []byte) {
	t.Helper()
	j, sess := b.claimed(t, "container", spec)
	defer j.unregister()
	workDir := b.r.workDir(j, sess)
	if _, err := sess.CreateInstance(testenv.Context(t, 30*time.Second), j.spec.Container.Request(jobspec.ContainerTarget{
		Name: InstanceName(id), WorkDir: workDir, StartScript: ContainerStartScript(id, workDir, j.spec.Container.Script),
	})); err != nil {
		t.Fatal(err)
	}
}

// TestContainerFailedAtLoginDeletesEarlierInstance fails a container
// job's second delivery at its region login (refused) while the first
// delivery's create made an instance it never recorded. Refused once, the
// job ends failed with its instance deleted; refused throughout, it is
// redelivered, and at SLUICE_MAX_DELIVER ends instance_not_deleted: never
// a plain failure with the instance billing.
func TestContainerFailedAtLoginDeletesEarlierInstance(t *testing.T) {
	t.Parallel()
	t.Run("refused once", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := "container-login-once"
		spec := containerSpec(id, "echo never\n")
		b.createEarlier(t, id, spec)
		b.refuseLogins(t, 1)
		b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "container", spec, 2))
		rec := b.record(t, id)
		if alive := b.compute.ContainerAlive(); rec.Status.Terminal() && len(alive) != 0 {
			t.Fatalf("record %s (%+v) with instances alive: %v", rec.Status, rec.Error, alive)
		}
		if !rec.Status.Terminal() {
			t.Fatalf("record %s, want the job ended", rec.Status)
		}
	})
	t.Run("refused throughout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := "container-login-always"
		spec := containerSpec(id, "echo never\n")
		b.createEarlier(t, id, spec)
		b.refuseLogins(t, 1<<30)
		out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "container", spec, 2))
		if rec := b.record(t, id); out.Action != consumer.Retry || rec.Status.Terminal() {
			t.Fatalf("settled %v, record %s (%+v), want a redelivery while the instance is alive", out.Action, rec.Status, rec.Error)
		}
		b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "container", spec, DefaultMaxDeliver+1))
		if rec := b.record(t, id); rec.Status != state.StatusFailed || rec.Error == nil || rec.Error.Code != CodeInstanceNotDeleted {
			t.Fatalf("record %s (%+v), want failed %s", rec.Status, rec.Error, CodeInstanceNotDeleted)
		}
	})
}

// TestComputeFailedBeforeSubmitCancelsEarlierJob fails a compute job's
// second delivery before its submit (its region login refused) while the
// first delivery's submit made a platform job it never recorded: refused
// once, the job ends with that platform job cancelled; refused
// throughout, it is redelivered, and at SLUICE_MAX_DELIVER ends
// job_not_cancelled.
func TestComputeFailedBeforeSubmitCancelsEarlierJob(t *testing.T) {
	t.Parallel()
	t.Run("refused once", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := "compute-login-once"
		spec := b.computeSpec(t, id)
		upstream, sess := b.submitEarlier(t, spec, "")
		b.refuseLogins(t, 1)
		b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 2))
		rec := b.record(t, id)
		if !rec.Status.Terminal() {
			t.Fatalf("record %s, want the job ended", rec.Status)
		}
		if p := upstreamPhase(t, sess, upstream); p != apiclient.JobCancelled {
			t.Fatalf("the job's platform job %s is %s after the job ended %s (%+v), want cancelled", upstream, p, rec.Status, rec.Error)
		}
	})
	t.Run("refused throughout", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := "compute-login-always"
		spec := b.computeSpec(t, id)
		b.submitEarlier(t, spec, "")
		b.refuseLogins(t, 1<<30)
		out := b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, 2))
		if rec := b.record(t, id); out.Action != consumer.Retry || rec.Status.Terminal() {
			t.Fatalf("settled %v, record %s (%+v), want a redelivery while the platform job may run", out.Action, rec.Status, rec.Error)
		}
		b.r.Handle(testenv.Context(t, 60*time.Second), b.deliverKind(t, "compute", spec, DefaultMaxDeliver+1))
		if rec := b.record(t, id); rec.Status != state.StatusFailed || rec.Error == nil || rec.Error.Code != CodeJobNotCancelled {
			t.Fatalf("record %s (%+v), want failed %s", rec.Status, rec.Error, CodeJobNotCancelled)
		}
	})
}
