package bench

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A step counts at its first sight in a job, after the publish; the
// warm-up's jobs and stamps outside a job are left out.
func TestTimelineKeepsLastSightAfterWarmup(t *testing.T) {
	t.Parallel()
	tl := newTimeline()
	tl.mark("before any job")
	tl.begin(time.Now())
	tl.mark("warm-up only")
	tl.forget()
	for range 3 {
		tl.begin(time.Now().Add(-time.Millisecond))
		// The last job's ack arrives after this one's publish: its own
		// ack, later, is the one kept.
		tl.mark("ack, confirmed")
		tl.mark("state submitting")
		time.Sleep(time.Millisecond)
		tl.mark("ack, confirmed")
	}
	tl.end()
	tl.mark("after the last job")
	steps, jobs := tl.medians()
	if jobs != 3 || len(steps) != 2 {
		t.Fatalf("jobs %d, steps %+v; want 3 jobs and 2 steps", jobs, steps)
	}
	if steps[0].name != "state submitting" || steps[0].seen != 3 || steps[0].median >= steps[1].median {
		t.Fatalf("steps %+v: want state submitting first, seen in 3 jobs, the ack stamped at its last sight", steps)
	}
}

func TestTimelineNamesStepsAndRequests(t *testing.T) {
	t.Parallel()
	rec := &nats.Msg{Subject: "$KV.SLUICE_STATE.job-1", Header: nats.Header{"Nats-Expected-Last-Subject-Sequence": {"0"}},
		Data: []byte(`{"job_id":"job-1","status":"submitting"}`)}
	ack := &nats.Msg{Subject: "$JS.ACK.SLUICE_JOBS.sluice-video.1.2.3.4.5", Reply: "_INBOX.x"}
	for m, want := range map[*nats.Msg]string{rec: "state submitting", ack: "ack, confirmed", {Subject: "sluice.jobs.video"}: ""} {
		if got := timelineStep(m); got != want {
			t.Errorf("%s: %q, want %q", m.Subject, got, want)
		}
	}
	tl := newTimeline()
	tl.begin(time.Now())
	h := tl.front("sim", simRequest)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/api/llm/v1/videos/generations", nil))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/results/vt-1.mp4", nil))
	tl.end()
	steps, _ := tl.medians()
	names := map[string]bool{}
	for _, s := range steps {
		names[s.name] = true
	}
	for _, want := range []string{"sim submit in", "sim submit answered", "sim get result in", "sim get result answered"} {
		if !names[want] {
			t.Errorf("no step %q in %v", want, names)
		}
	}
}
