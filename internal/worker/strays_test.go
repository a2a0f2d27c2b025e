package worker_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
)

// A job published under sluice.jobs. to a subject that no worker serves,
// an unknown kind or an extra token, ends as a failed event plus a dead
// letter and leaves SLUICE_JOBS; so do such messages stored before any
// worker ran (a stream made by enqueue or an older version).
func TestUnservedSubjectsFailAndDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// Stored before the worker starts.
	b.publish(t, "vidoe", "typo-kind", videoSpec("typo-kind", "a typo in the subject"))
	b.publish(t, "speech.extra", "extra-token", speechSpec("extra-token", "one token too many", "sync"))
	// A copy of a job a worker already holds: only the copy goes.
	b.leaveRecord(t, "held-1", func(r *state.Record) {
		r.Kind, r.Status, r.Upstream.TaskID = "video", state.StatusRunning, "t-held-1"
	})
	b.publish(t, "vidoe", "held-1", videoSpec("held-1", "a copy of a held job"))
	b.start(t)
	// Published while it runs; names no kind anywhere.
	b.publish(t, "bogus", "no-kind", "this is not json")

	for _, c := range []struct{ id, kind, subject string }{
		{"typo-kind", "video", "sluice.jobs.vidoe"},
		{"extra-token", "speech", "sluice.jobs.speech.extra"},
		{"no-kind", contract.KindUnknown, "sluice.jobs.bogus"},
	} {
		ev := b.await(t, c.id, 30*time.Second)
		if ev.Data.Status != "failed" || ev.Data.Error == nil || ev.Data.Error.Code != runner.CodeInvalidSpec || ev.Data.Error.Stage != "validate" {
			t.Errorf("%s: event %s %+v", c.id, ev.Data.Status, ev.Data.Error)
			continue
		}
		if ev.Data.Kind != c.kind || !strings.Contains(ev.Data.Error.Message, c.subject+" is served by no worker") {
			t.Errorf("%s: kind %q, message %q", c.id, ev.Data.Kind, ev.Data.Error.Message)
		}
	}
	if m := b.media.SubmitCount("one token too many"); m != 0 {
		t.Errorf("a job on sluice.jobs.speech.extra was submitted %d times", m)
	}

	// Every one is dead-lettered under its kind, and SLUICE_JOBS is empty.
	want := map[string]string{
		"typo-kind": "sluice.dlq.video", "extra-token": "sluice.dlq.speech", "no-kind": "sluice.dlq.unknown",
		"held-1": "sluice.dlq.video",
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := map[string]string{}
		for _, m := range b.deadLetters(t) {
			got[m.Header.Get(contract.HeaderJobID)] = m.Subject
		}
		left := b.pendingJobs(t)
		ok := left == 0
		for id, subj := range want {
			ok = ok && got[id] == subj
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters %v (want %v), %d messages left in %s", got, want, left, contract.JobsStream)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rec := b.record(t, "extra-token"); rec.Status != "failed" || rec.Error == nil {
		t.Errorf("record of extra-token = %+v", rec)
	}
	if rec := b.record(t, "held-1"); rec.Status != state.StatusRunning || rec.Attempts != 1 {
		t.Errorf("the copy on a wrong subject changed the held job's record: %+v", rec)
	}
	for _, ev := range b.events(t) {
		if ev.Subject == "held-1" {
			t.Errorf("the copy of a held job published %s", ev.ID)
		}
	}
}

// /metrics: upstream endpoints are route templates (no template names or
// ids), failures carry their error code, and the jobs waiting in
// SLUICE_JOBS are counted per kind.
func TestMetricsLabels(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	// This worker serves compute only: the video jobs wait.
	b.start(t, func(c *config.Config) { c.Kinds = []string{"compute"} })
	b.publish(t, "compute", "hpc-metrics", computeSpec(t, b, "hpc-metrics", "#!/bin/sh\n#SIM output result.dat 1K\ncp params.nml params-copy.nml\n"))
	bad := computeSpec(t, b, "hpc-bad", "#!/bin/sh\ntrue\n")
	bad["compute"].(map[string]any)["job"].(map[string]any)["wall_time"] = "forever"
	b.publish(t, "compute", "hpc-bad", bad)
	b.publish(t, "video", "v-wait-1", videoSpec("v-wait-1", "waits"))
	b.publish(t, "video", "v-wait-2", videoSpec("v-wait-2", "waits too"))
	if ev := b.await(t, "hpc-metrics", 30*time.Second); ev.Data.Status != "succeeded" {
		t.Fatalf("hpc-metrics: %s %+v", ev.Data.Status, ev.Data.Error)
	}
	b.await(t, "hpc-bad", 30*time.Second)

	var text string
	wants := []string{
		`sluice_upstream_requests_total{api="compute",endpoint="POST /hpc/openapi/v2/apptemplates/{template_type}/{template_name}/job",status="200"} 1`,
		`sluice_upstream_requests_total{api="compute",endpoint="GET /hpc/openapi/v2/jobs/{job_id}",status="200"}`,
		`sluice_job_failures_total{code="invalid_spec",kind="compute",stage="validate"} 1`,
		`sluice_jobs_waiting{kind="video"} 2`,
		`sluice_jobs_waiting{kind="compute"} 0`,
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		text = b.scrape(t)
		missing := ""
		for _, w := range wants {
			if !strings.Contains(text, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s:\n%s", missing, grepLines(text, "sluice_"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "sluice_upstream_requests_total") &&
			(strings.Contains(line, "BASIC") || strings.Contains(line, "alice") || strings.Contains(line, "/jobs/4")) {
			t.Errorf("endpoint label holds user data: %s", line)
		}
	}
}

func (b *bundle) scrape(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + b.ep.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
