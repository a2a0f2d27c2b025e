package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// The job-query answers that mean "not found", and those that do not.
func TestComputeJobNotFoundRule(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		status   int
		body     string
		notFound bool
	}{
		{"HTTP 404 with an envelope", 404, `{"code":"404","msg":"no"}`, true},
		{"HTTP 404 without an envelope", 404, `404 page not found`, true},
		{"success without a record", 200, `{"code":"0","msg":"success","data":null}`, true},
		{"says the job does not exist", 200, `{"code":"10004","msg":"作业 4001 不存在"}`, true},
		{"says not found in English", 200, `{"code":"20002","msg":"job 4001 not found"}`, true},
		{"internal error 10001", 200, `{"code":"10001","msg":"internal error"}`, false},
		{"permission denied", 200, `{"code":"10008","msg":"permission denied"}`, false},
		{"HTTP 400 envelope", 400, `{"code":"10004","msg":"invalid parameter"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupCompute(t, computeOpts{wrap: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.HasPrefix(r.URL.Path, "/hpc/openapi/v2/jobs/") {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(tt.status)
						_, _ = w.Write([]byte(tt.body))
						return
					}
					next.ServeHTTP(w, r)
				})
			}, client: func(c *apiclient.ComputeConfig) { c.MaxAttempts = 1 }})
			_, err := b.session(t).Job(context.Background(), "4001")
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, apiclient.ErrJobNotFound); got != tt.notFound {
				t.Errorf("ErrJobNotFound = %v, want %v: %v", got, tt.notFound, err)
			}
		})
	}
}

// JobPhaseOf reads every platform status code; JobEndReason words the
// failures.
func TestJobPhaseOfPlatformCodes(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	for _, tt := range []struct {
		status, state, reason string
		exit                  *string
		want                  apiclient.JobPhase
		kind                  apiclient.JobEndKind
		words                 string
	}{
		{"statQ", "", "", nil, apiclient.JobQueued, "", ""},
		{"statH", "", "", nil, apiclient.JobQueued, "", ""},
		{"statW", "", "", nil, apiclient.JobQueued, "", ""},
		{"statRQ", "", "", nil, apiclient.JobQueued, "", ""},
		{"statR", "", "", nil, apiclient.JobRunning, "", ""},
		{"statS", "", "", nil, apiclient.JobRunning, "", ""},
		{"statE", "", "", nil, apiclient.JobRunning, "", ""},
		{"statE", "", "", str("0"), apiclient.JobSucceeded, "", ""},
		{"statC", "", "", str("0"), apiclient.JobSucceeded, "", ""},
		{"statC", "FAILED", "", str("0"), apiclient.JobFailed, "", "the scheduler reports it failed"},
		{"statC", "COMPLETED", "NonZeroExitCode", str("0"), apiclient.JobFailed, "", "NonZeroExitCode"},
		{"statC", "", "", str("2"), apiclient.JobFailed, "", "exit code 2"},
		{"statD", "", "", nil, apiclient.JobFailed, "", "the scheduler reports it failed"},
		{"statDE", "", "", str("0"), apiclient.JobCancelled, apiclient.EndCancelled, "cancelled"},
		{"statT", "", "", str("0"), apiclient.JobFailed, apiclient.EndTimedOut, "timed out after the requested wall time 00:10:00"},
		{"TIMEOUT", "", "", str("10006"), apiclient.JobFailed, apiclient.EndTimedOut, "timed out"},
		{"statN", "", "", nil, apiclient.JobFailed, apiclient.EndNodeFailure, "node failure on c01"},
		{"statX", "", "", nil, apiclient.JobUnknown, "", ""},
		{"statEX", "", "", nil, apiclient.JobUnknown, "", ""},
		{"statF", "", "", str("0"), apiclient.JobSucceeded, "", ""},
	} {
		name := fmt.Sprintf("%s/%s/%s", tt.status, tt.state, tt.reason)
		d := &apiclient.JobDetail{JobStatus: tt.status, ExitCode: tt.exit, Reason: tt.reason, WalltimeReq: "00:10:00", NodeUsed: "c01"}
		if tt.state != "" {
			d.JobInitAttr = map[string]string{"JobState": tt.state}
		}
		if got := apiclient.JobPhaseOf(d); got != tt.want {
			t.Errorf("%s: phase %s, want %s", name, got, tt.want)
		}
		if got := apiclient.JobEndKindOf(d); got != tt.kind {
			t.Errorf("%s: end kind %q, want %q", name, got, tt.kind)
		}
		if tt.words != "" && !strings.Contains(apiclient.JobEndReason(d), tt.words) {
			t.Errorf("%s: reason %q, want %q in it", name, apiclient.JobEndReason(d), tt.words)
		}
	}
	if !apiclient.JobCancelled.Terminal() {
		t.Error("cancelled is not terminal")
	}
}

// submitted submits a job of script and returns its id.
func submitted(t *testing.T, s *apiclient.ClusterSession, name, script string) string {
	t.Helper()
	path := uploadScript(t, s, "/jobs/"+name, script)
	id, err := s.SubmitJob(context.Background(), "BASIC", "BASE", computeJobRequest(name, path))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// On the platform an ended job leaves the realtime detail for the history,
// whose record carries the end and the accounting; the job list shows
// current jobs; cancel deletes a running job. compute-api.md's letter has
// none of these: every call says ErrNotSupported.
func TestComputeHistoryListCancel(t *testing.T) {
	t.Parallel()
	t.Run("platform", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.HistoryDelay = 5 * time.Second }})
		s, ctx := b.session(t), context.Background()
		done := submitted(t, s, "done", "#SIM runfor 1m\necho hi\n")
		running := submitted(t, s, "running", "#SIM runfor 1h\n")
		slow := submitted(t, s, "slow", "#SIM runfor 20m\n")
		b.clock.Advance(2 * time.Minute) // "done" ended 50 s ago

		if _, err := s.Job(ctx, done); !errors.Is(err, apiclient.ErrJobNotFound) {
			t.Fatalf("ended job in the realtime detail: %v", err)
		}
		h, err := s.HistoryJob(ctx, done, apiclient.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		d := h.Detail()
		if apiclient.JobPhaseOf(d) != apiclient.JobSucceeded || d.OutputPath != "/jobs/done/done.o"+done || h.AcctTime == "" {
			t.Errorf("history record %+v", h)
		}
		var usage map[string]any
		if err := json.Unmarshal(h.Usage(), &usage); err != nil || usage["cpuNuclearHour"] != "0.0667" || usage["jobWalltimeUsed"] != float64(60) {
			t.Errorf("usage %s", h.Usage())
		}
		if _, err := s.HistoryJob(ctx, running, apiclient.HistoryQuery{}); !errors.Is(err, apiclient.ErrJobNotFound) {
			t.Errorf("running job in the history: %v", err)
		}
		// The one-job lookup misses (wrong scheduler); the list finds it.
		before := b.count("requests:" + apisim.EndpointComputeHistoryList + ":200")
		if _, err := s.HistoryJob(ctx, done, apiclient.HistoryQuery{SchedulerID: "2001", AcctTime: "x"}); err != nil {
			t.Errorf("with acctTime: %v", err)
		}
		if recs, err := s.HistoryJobs(ctx, apiclient.HistoryQuery{}, nil); err != nil || len(recs) != 1 || recs[0].JobID != done {
			t.Errorf("history list %+v %v", recs, err)
		}
		if b.count("requests:"+apisim.EndpointComputeHistoryList+":200") <= before {
			t.Error("the history list was not asked")
		}

		// The list keeps the ended job ~5 minutes after the detail
		// dropped it, like the platform's.
		jobs, err := s.Jobs(ctx, "")
		if err != nil || len(jobs) != 3 || jobs[0].JobID != done || jobs[1].JobID != running || jobs[1].JobName != "running" ||
			jobs[1].Status != "statR" || jobs[1].SubmitTime == "" {
			t.Fatalf("job list %+v %v", jobs, err)
		}
		b.clock.Advance(5 * time.Minute)
		jobs, err = s.Jobs(ctx, "")
		if err != nil || len(jobs) != 2 || jobs[0].JobID != running || jobs[0].JobName != "running" || jobs[0].Status != "statR" || jobs[0].SubmitTime == "" {
			t.Fatalf("job list %+v %v", jobs, err)
		}

		if err := s.CancelJob(ctx, "", "", running); err != nil {
			t.Fatal(err)
		}
		if d, err := s.Job(ctx, running); err != nil || apiclient.JobPhaseOf(d) != apiclient.JobCancelled || d.JobStatus != "statDE" {
			t.Errorf("cancelled job %+v %v", d, err)
		}
		err = s.CancelJob(ctx, "", "", done)
		var env *apiclient.EnvelopeError
		if !errors.As(err, &env) || errors.Is(err, apiclient.ErrJobNotFound) {
			t.Errorf("cancel of an ended job: %v", err)
		}
		if err := s.CancelJob(ctx, "", "", "999999"); !errors.Is(err, apiclient.ErrJobNotFound) {
			t.Errorf("cancel of an unknown job: %v", err)
		}
		b.clock.Advance(time.Minute)
		if h, err := s.HistoryJob(ctx, running, apiclient.HistoryQuery{}); err != nil || apiclient.JobPhaseOf(h.Detail()) != apiclient.JobCancelled {
			t.Errorf("cancelled job's history %+v %v", h, err)
		}
		_ = slow
	})
	t.Run("letter", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.Letter = true }})
		s, ctx := b.session(t), context.Background()
		id := submitted(t, s, "done", "#SIM runfor 1m\necho hi\n")
		b.clock.Advance(48 * time.Hour)
		if d, err := s.Job(ctx, id); err != nil || apiclient.JobPhaseOf(d) != apiclient.JobSucceeded {
			t.Fatalf("letter keeps ended jobs in the detail: %+v %v", d, err)
		}
		if _, err := s.HistoryJob(ctx, id, apiclient.HistoryQuery{}); !errors.Is(err, apiclient.ErrNotSupported) {
			t.Errorf("history: %v", err)
		}
		if _, err := s.Jobs(ctx, ""); !errors.Is(err, apiclient.ErrNotSupported) {
			t.Errorf("job list: %v", err)
		}
		if err := s.CancelJob(ctx, "", "", id); !errors.Is(err, apiclient.ErrNotSupported) {
			t.Errorf("cancel: %v", err)
		}
	})
}

// WaitJob follows a job that leaves the realtime detail into the history.
func TestComputeWaitJobReadsHistory(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.HistoryDelay = time.Second }})
	s := b.session(t)
	id := submitted(t, s, "timeout", "#SIM runfor 1h\n")
	d, err := s.WaitJob(context.Background(), id, apiclient.WaitJobOptions{Interval: 20 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if apiclient.JobPhaseOf(d) != apiclient.JobFailed || apiclient.JobEndKindOf(d) != apiclient.EndTimedOut || d.JobStatus != "TIMEOUT" {
		t.Errorf("detail %+v", d)
	}
}

// A one-job history answer this client cannot read as a record (no
// jobState) is not taken for the job's end: the history list is asked.
func TestComputeHistoryOneUnreadable(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{
		sim: func(c *apisim.ComputeConfig) { c.HistoryDelay = time.Second },
		wrap: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(r.URL.Path, "/hpc/openapi/v2/historyjobs/") {
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"code":"0","msg":"success","data":{"list":[]}}`))
					return
				}
				next.ServeHTTP(w, r)
			})
		},
	})
	s := b.session(t)
	id := submitted(t, s, "odd", "#SIM runfor 1m\n")
	b.clock.Advance(time.Hour)
	h, err := s.HistoryJob(context.Background(), id, apiclient.HistoryQuery{})
	if err != nil || h.JobState != "statC" {
		t.Fatalf("record %+v, %v", h, err)
	}
}
