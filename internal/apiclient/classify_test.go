package apiclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// cannedAnswer is an answer a test puts in front of the simulator.
type cannedAnswer struct {
	status int
	body   string
}

// withCanned answers the routes that read a job, an instance, the history
// or a list, and the cancel, with the current canned answer (none: the
// simulator answers).
func withCanned(cur *atomic.Pointer[cannedAnswer]) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a := cur.Load()
			p := r.URL.Path
			target := strings.HasSuffix(p, "/detail") || strings.HasSuffix(p, "/task/list") ||
				strings.HasPrefix(p, "/hpc/openapi/v2/jobs") || strings.HasPrefix(p, "/hpc/openapi/v2/historyjobs")
			if a == nil || !target {
				h.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(a.status)
			_, _ = w.Write([]byte(a.body))
		})
	}
}

func envelopeBody(code, msg string) string {
	b, _ := json.Marshal(map[string]any{"code": code, "msg": msg, "data": nil})
	return string(b)
}

// Every route that can answer "missing" reads it by one rule: only an
// answer that says the thing is not there (platform-evidence.md section
// 1) is missing; a busy 10001 or any other error envelope is not.
func TestClassifyPlatformAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var cur atomic.Pointer[cannedAnswer]
	b := setupCompute(t, computeOpts{
		client: func(c *apiclient.ComputeConfig) { c.MaxAttempts = 1 },
		wrap:   withCanned(&cur),
	})
	s := b.session(t)
	calls := map[string]func() error{
		"instance detail": func() error { _, err := s.Instance(ctx, "inst1"); return err },
		"job detail":      func() error { _, err := s.Job(ctx, "4001"); return err },
		"cancel job":      func() error { return s.CancelJob(ctx, "", "", "4001") },
	}
	answers := []struct {
		name string
		a    cannedAnswer
		want apiclient.Class
	}{
		{"busy 10001", cannedAnswer{200, envelopeBody("10001", "internal error")}, apiclient.ClassBusy},
		{"busy 10001 naming a missing thing", cannedAnswer{200, envelopeBody("10001", "backend does not exist yet, retry")}, apiclient.ClassBusy},
		{"permission denied", cannedAnswer{200, envelopeBody("10008", "permission denied")}, apiclient.ClassRefused},
		{"invalid parameter", cannedAnswer{200, envelopeBody("10004", "invalid parameter")}, apiclient.ClassRefused},
		{"unknown code", cannedAnswer{200, envelopeBody("716866", "failed")}, apiclient.ClassRefused},
		{"says missing", cannedAnswer{200, envelopeBody("20002", "任务不存在")}, apiclient.ClassMissing},
		{"404 envelope", cannedAnswer{404, envelopeBody("404", "not found")}, apiclient.ClassMissing},
		{"503", cannedAnswer{503, envelopeBody("503", "unavailable")}, apiclient.ClassBusy},
	}
	for _, a := range answers {
		for name, call := range calls {
			cur.Store(&a.a)
			err := call()
			cur.Store(nil)
			if got := apiclient.Classify(err); got != a.want {
				t.Errorf("%s answered %s: class %v (err %v), want %v", name, a.name, got, err, a.want)
			}
		}
	}
	if got := apiclient.Classify(nil); got != apiclient.ClassOK {
		t.Errorf("Classify(nil) = %v", got)
	}
}

// A paid submit answered with an error envelope is sent again only when
// the answer says the token was refused: a fresh token after a busy answer
// is no proof the platform did not act.
func TestSubmitNotResentAfterBusyEnvelope(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.TokenLifetime = time.Hour }})
	s := b.session(t)
	if _, err := s.SchedulerID(ctx); err != nil {
		t.Fatal(err)
	}
	// The token has worked; past half its life a refresh hands out a new
	// one, so the old client took the envelope for an expiry and re-sent.
	b.clock.Advance(40 * time.Minute)
	b.sim.AnswerBusy(apisim.EndpointComputeSubmit, 1)
	_, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("busy-submit", "/x/job.sh"))
	if n := b.sim.Counters().Requests(apisim.EndpointComputeSubmit); n != 1 {
		t.Errorf("submit requests = %d, want 1 (not re-sent)", n)
	}
	if got := apiclient.Classify(err); got != apiclient.ClassAmbiguous {
		t.Errorf("class %v (err %v), want ambiguous: an internal error may come after the platform acted", got, err)
	}
}

// A status the client knows is read as it is: an end time on a Running
// detail does not make it stopped (the instance may run and bill).
func TestInstancePhaseKnownStatusWithEndTime(t *testing.T) {
	t.Parallel()
	in := &apiclient.Instance{Status: "Running", EndTime: "2026-11-29 10:00:00"}
	if got := apiclient.InstancePhaseOf(in); got != apiclient.InstanceRunning {
		t.Errorf("phase = %v, want running", got)
	}
	in.Status = "mystery"
	if got := apiclient.InstancePhaseOf(in); got != apiclient.InstanceStopped {
		t.Errorf("unknown status with an end time: phase = %v, want stopped", got)
	}
}
