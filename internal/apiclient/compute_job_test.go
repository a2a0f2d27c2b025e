package apiclient_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// computeJobRequest is a valid debug-queue job of script.
func computeJobRequest(name, script string) apiclient.JobRequest {
	return apiclient.JobRequest{MapAppJobInfo: map[string]any{
		"GAP_SUBMIT_TYPE": "cmd", "GAP_JOB_NAME": name, "GAP_QUEUE": "debug",
		"GAP_NNODE": "1", "GAP_PPN": "4", "GAP_WALL_TIME": "00:10:00",
		"GAP_WORK_DIR": path.Dir(script), "GAP_SCHED_FILE": script,
		"GAP_NODE_TYPE": "", "GAP_MULTI_SUB": "", "GAP_JOB_MEM": "", "GAP_NGPU": "", "GAP_NDCU": "",
		"GAP_STD_OUT_FILE": "", "GAP_STD_ERR_FILE": "", "GAP_CLUSTER_ID": "1001",
		"GAP_GUI": 0, "advance": false,
	}}
}

// uploadScript stores body as dir/job.sh and returns its path.
func uploadScript(t *testing.T, s *apiclient.ClusterSession, dir, body string) string {
	t.Helper()
	if err := s.Upload(context.Background(), dir, "job.sh", true, computeOpen(body)); err != nil {
		t.Fatalf("upload script: %v", err)
	}
	return dir + "/job.sh"
}

func TestComputeSubmitAmbiguous(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fault       apisim.Fault
		wantCreated int64
	}{
		{"500 after the job was created", apisim.Fault{Error500AfterRate: 1}, 1},
		{"unreadable success", apisim.Fault{MalformedRate: 1}, 1},
		{"truncated success", apisim.Fault{TruncateRate: 1}, 1},
		// The hang is served by hangSubmit below: the shared HangRate
		// fault leaves a POST body unread, and the server then never
		// notices the client going away.
		{"no answer in time", apisim.Fault{}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			opts := computeOpts{client: func(c *apiclient.ComputeConfig) { c.AttemptTimeout = 200 * time.Millisecond }}
			if tt.fault == (apisim.Fault{}) {
				opts.wrap = hangSubmit
			}
			b := setupCompute(t, opts)
			s := b.session(t)
			script := uploadScript(t, s, "/jobs/amb", "#!/bin/sh\necho hi\n")
			b.sim.Faults().Set(apisim.EndpointComputeSubmit, tt.fault)
			_, err := s.SubmitJob(context.Background(), "BASIC", "BASE", computeJobRequest("amb", script))
			if !errors.Is(err, apiclient.ErrAmbiguous) {
				t.Fatalf("err = %v, want ErrAmbiguous", err)
			}
			if apiclient.IsTransient(err) {
				t.Error("an ambiguous submit must not be transient")
			}
			if n := b.sim.Counters().Requests(apisim.EndpointComputeSubmit); n != 1 {
				t.Errorf("submit attempts = %d, want exactly 1", n)
			}
			if n := b.sim.SubmitCount("amb"); n != tt.wantCreated {
				t.Errorf("SubmitCount = %d, want %d", n, tt.wantCreated)
			}
			computeNoSecret(t, err, b.currentTokens(t)...)
		})
	}
}

func TestComputeSubmitCancelledAfterSending(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !strings.HasSuffix(r.URL.Path, "/job") {
				h.ServeHTTP(w, r)
				return
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			cancel() // the caller gives up while the job exists
			<-r.Context().Done()
		})
	}})
	s := b.session(t)
	script := uploadScript(t, s, "/jobs/cancel", "echo hi\n")
	_, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("cancel", script))
	if !errors.Is(err, apiclient.ErrAmbiguous) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrAmbiguous wrapping context.Canceled", err)
	}
	if n := b.sim.SubmitCount("cancel"); n != 1 {
		t.Errorf("SubmitCount = %d", n)
	}
}

// hangSubmit lets the simulator create the job, then holds the answer
// until the client goes away.
func hangSubmit(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/job") {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		<-r.Context().Done()
	})
}

func TestComputeSubmitRetriedWhenNothingWasCreated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("429", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		script := uploadScript(t, s, "/jobs/r429", "echo hi\n")
		b.sim.Faults().Set(apisim.EndpointComputeSubmit, apisim.Fault{Error429Rate: 1, RetryAfter: 2 * time.Second})
		b.sleep.OnWait(func(int) { b.sim.Faults().Reset() })
		id, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("r429", script))
		if err != nil || id == "" {
			t.Fatalf("SubmitJob = %q, %v", id, err)
		}
		if n := b.sim.SubmitCount("r429"); n != 1 {
			t.Errorf("SubmitCount = %d, want 1", n)
		}
		if w := b.sleep.Waits(); len(w) != 1 || w[0] != 2*time.Second {
			t.Errorf("waits = %v, want [2s]", w)
		}
	})
	t.Run("503", func(t *testing.T) {
		t.Parallel()
		var refused atomic.Int32
		b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/job") && refused.Add(1) <= 2 {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = io.WriteString(w, `{"code":"503","msg":"busy"}`)
					return
				}
				h.ServeHTTP(w, r)
			})
		}})
		s := b.session(t)
		script := uploadScript(t, s, "/jobs/r503", "echo hi\n")
		if _, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("r503", script)); err != nil {
			t.Fatal(err)
		}
		if n := b.sim.SubmitCount("r503"); n != 1 {
			t.Errorf("SubmitCount = %d, want 1", n)
		}
	})
	t.Run("503 every time", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/job") {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				h.ServeHTTP(w, r)
			})
		}})
		s := b.session(t)
		_, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("never", "/x.sh"))
		if errors.Is(err, apiclient.ErrAmbiguous) || !apiclient.IsTransient(err) {
			t.Fatalf("err = %v, want transient and unambiguous", err)
		}
		if w := b.sleep.Waits(); len(w) != 3 {
			t.Errorf("waits = %v, want 3 (4 attempts)", w)
		}
	})
	t.Run("expired token", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.TokenMaxUses = 3 }})
		s := b.session(t)                                      // use 1
		script := uploadScript(t, s, "/jobs/tok", "echo hi\n") // use 2
		if _, err := s.SchedulerID(ctx); err != nil {          // use 3
			t.Fatal(err)
		}
		if _, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("tok", script)); err != nil {
			t.Fatal(err)
		}
		if n := b.sim.SubmitCount("tok"); n != 1 {
			t.Errorf("SubmitCount = %d, want 1", n)
		}
		if n := b.count("requests:compute.submit:401"); n != 1 {
			t.Errorf("401 answers = %d, want 1", n)
		}
	})
}

func TestComputeSubmitRejected(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{})
	s := b.session(t)
	ctx := context.Background()
	script := uploadScript(t, s, "/jobs/bad", "echo hi\n")
	edit := func(f func(m map[string]any)) apiclient.JobRequest {
		r := computeJobRequest("bad", script)
		f(r.MapAppJobInfo)
		return r
	}
	tests := []struct {
		name, tType, tName string
		req                apiclient.JobRequest
		mention            string
	}{
		{"unknown queue", "BASIC", "BASE", edit(func(m map[string]any) { m["GAP_QUEUE"] = "gold" }), "GAP_QUEUE"},
		{"bad wall time", "BASIC", "BASE", edit(func(m map[string]any) { m["GAP_WALL_TIME"] = "10m" }), "GAP_WALL_TIME"},
		{"wall time over the queue's", "BASIC", "BASE", edit(func(m map[string]any) { m["GAP_WALL_TIME"] = "02:00:00" }), "GAP_WALL_TIME"},
		{"too many nodes", "BASIC", "BASE", edit(func(m map[string]any) { m["GAP_NNODE"] = "9" }), "GAP_NNODE"},
		{"missing ppn", "BASIC", "BASE", edit(func(m map[string]any) { delete(m, "GAP_PPN") }), "GAP_PPN"},
		{"missing script", "BASIC", "BASE", edit(func(m map[string]any) { m["GAP_SCHED_FILE"] = "/nope.sh" }), "GAP_SCHED_FILE"},
		{"other cluster", "BASIC", "BASE", edit(func(m map[string]any) { m["GAP_CLUSTER_ID"] = "1002" }), "GAP_CLUSTER_ID"},
		{"unknown template", "BASIC", "NOPE", computeJobRequest("bad", script), "template"},
		{"wrong scheduler", "BASIC", "BASE", func() apiclient.JobRequest {
			r := computeJobRequest("bad", script)
			r.StrJobManagerID = "2002"
			return r
		}(), "strJobManagerID"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.SubmitJob(ctx, tt.tType, tt.tName, tt.req)
			env, ok := errors.AsType[*apiclient.EnvelopeError](err)
			if !ok || env.Code != apisim.ComputeCodeInvalid || !strings.Contains(env.Msg, tt.mention) {
				t.Fatalf("err = %v, want an envelope error mentioning %s", err, tt.mention)
			}
			if errors.Is(err, apiclient.ErrAmbiguous) {
				t.Error("a refusal is not ambiguous")
			}
		})
	}
	if n := b.sim.SubmitCount("bad"); n != 0 {
		t.Errorf("SubmitCount = %d, want 0", n)
	}

	t.Run("bad arguments", func(t *testing.T) {
		args := []struct {
			name, field, tType, tName string
			req                       apiclient.JobRequest
		}{
			{"empty type", "templateType", "", "BASE", computeJobRequest("x", script)},
			{"slash in name", "templateName", "BASIC", "a/b", computeJobRequest("x", script)},
			{"no job info", "MapAppJobInfo", "BASIC", "BASE", apiclient.JobRequest{}},
			{"unencodable", "MapAppJobInfo", "BASIC", "BASE", apiclient.JobRequest{MapAppJobInfo: map[string]any{"x": make(chan int)}}},
		}
		for _, a := range args {
			_, err := s.SubmitJob(ctx, a.tType, a.tName, a.req)
			if !errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), a.field) {
				t.Errorf("%s: err = %v, want ErrInvalidArgument naming %s", a.name, err, a.field)
			}
		}
		for _, id := range []string{"", "a/b"} {
			if _, err := s.Job(ctx, id); !errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), "jobID") {
				t.Errorf("Job(%q): err = %v", id, err)
			}
		}
	})
}

func TestComputeJobFlow(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{})
	ctx := context.Background()

	toks, err := b.client.Tokens(ctx)
	if err != nil || len(toks) != 3 {
		t.Fatalf("Tokens = %v, %v", toks, err)
	}
	s, err := b.client.Cluster(ctx, "cluster-a")
	if err != nil {
		t.Fatal(err)
	}
	center, err := s.Center(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := center.ClusterUserInfo.HomePath + "/flow"
	input := strings.Repeat("input line\n", 1000)
	if err := s.Upload(ctx, dir, "input.dat", true, computeOpen(input)); err != nil {
		t.Fatal(err)
	}
	script := uploadScript(t, s, dir, strings.Join([]string{
		"#!/bin/bash",
		"#SBATCH -J flow",
		"#SIM runfor 2m",
		"echo hello from the simulator",
		"cp input.dat results/copy.dat",
		"#SIM output results/big.bin 3M",
		"#SIM stderr a warning",
	}, "\n"))
	sched, err := s.SchedulerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	queues, err := s.Queues(ctx, s.UserName(), sched)
	if err != nil {
		t.Fatal(err)
	}
	if len(queues) == 0 || queues[0].QueueName != "debug" {
		t.Fatalf("queues = %+v", queues)
	}
	req := computeJobRequest("flow", script)
	req.StrJobManagerID = sched
	jobID, err := s.SubmitJob(ctx, "BASIC", "BASE", req)
	if err != nil {
		t.Fatal(err)
	}

	var phases []apiclient.JobPhase
	d, err := s.WaitJob(ctx, jobID, apiclient.WaitJobOptions{
		Interval: 15 * time.Second,
		OnPhase:  func(p apiclient.JobPhase, _ *apiclient.JobDetail) { phases = append(phases, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []apiclient.JobPhase{apiclient.JobQueued, apiclient.JobRunning, apiclient.JobSucceeded}
	if strings.Join(phaseStrings(phases), ",") != strings.Join(phaseStrings(want), ",") {
		t.Errorf("phases = %v, want %v", phases, want)
	}
	if d.JobID != jobID || d.ExitCode == nil || *d.ExitCode != "0" || d.JobEndTime == nil || d.JobStatus != "statC" || d.JobState() != "COMPLETED" {
		t.Errorf("detail = %+v", d)
	}
	if d.OutputPath != dir+"/flow.o"+jobID || d.ErrorPath != dir+"/flow.e"+jobID {
		t.Errorf("outputPath %q errorPath %q", d.OutputPath, d.ErrorPath)
	}

	download := func(p string) []byte {
		t.Helper()
		rc, err := s.Download(ctx, p)
		if err != nil {
			t.Fatalf("Download %s: %v", p, err)
		}
		defer func() { _ = rc.Close() }()
		got, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		return got
	}
	stdout := download(d.OutputPath)
	if simOut, _ := b.sim.File(d.OutputPath); !bytes.Equal(stdout, simOut) || !strings.Contains(string(stdout), "hello from the simulator\n") {
		t.Errorf("stdout = %q", stdout)
	}
	if stderr := download(d.ErrorPath); string(stderr) != "a warning\n" {
		t.Errorf("stderr = %q", stderr)
	}
	if copied := download(dir + "/results/copy.dat"); string(copied) != input {
		t.Errorf("copy differs: %d bytes", len(copied))
	}
	big := download(dir + "/results/big.bin")
	wantBig := sha256.New()
	_, _ = io.Copy(wantBig, apisim.ComputeOutputBytes(dir+"/results/big.bin", 3<<20))
	if gotBig := sha256.Sum256(big); len(big) != 3<<20 || !bytes.Equal(gotBig[:], wantBig.Sum(nil)) {
		t.Errorf("big.bin: %d bytes, content differs", len(big))
	}
	if n := b.sim.SubmitCount("flow"); n != 1 {
		t.Errorf("SubmitCount = %d", n)
	}
}

func phaseStrings(ps []apiclient.JobPhase) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = string(p)
	}
	return out
}

func TestComputeJobOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("non-zero exit fails", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		script := uploadScript(t, s, "/jobs/fail", "echo before\nexit 3\necho after\n")
		id, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("fail", script))
		if err != nil {
			t.Fatal(err)
		}
		d, err := s.WaitJob(ctx, id, apiclient.WaitJobOptions{Interval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if apiclient.JobPhaseOf(d) != apiclient.JobFailed || d.ExitCode == nil || *d.ExitCode != "3" {
			t.Errorf("phase %s exit %v", apiclient.JobPhaseOf(d), d.ExitCode)
		}
		if out, _ := b.sim.File(d.OutputPath); strings.Contains(string(out), "after") {
			t.Errorf("the script went on after exit: %q", out)
		}
	})

	t.Run("vanished job", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		script := uploadScript(t, s, "/jobs/gone", "#SIM runfor 30s\n#SIM vanish\n")
		id, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("gone", script))
		if err != nil {
			t.Fatal(err)
		}
		var last apiclient.JobPhase
		_, err = s.WaitJob(ctx, id, apiclient.WaitJobOptions{
			Interval: 20 * time.Second,
			OnPhase:  func(p apiclient.JobPhase, _ *apiclient.JobDetail) { last = p },
		})
		if !errors.Is(err, apiclient.ErrJobNotFound) || !strings.Contains(err.Error(), "vanished") {
			t.Fatalf("err = %v, want a vanished ErrJobNotFound", err)
		}
		if last != apiclient.JobRunning {
			t.Errorf("last phase = %s, want running", last)
		}
		_, err = s.Job(ctx, id)
		if !errors.Is(err, apiclient.ErrJobNotFound) || !apiclient.JobVanished(err, apiclient.JobRunning) {
			t.Fatalf("Job: err = %v, want ErrJobNotFound", err)
		}
		if apiclient.JobVanished(err, "") {
			t.Error("a job never seen is not vanished")
		}
		if env, ok := errors.AsType[*apiclient.EnvelopeError](err); !ok || env.Code != apisim.ComputeCodeNotFound {
			t.Errorf("the envelope error is not kept: %v", err)
		}
		if n := b.count("jobs:vanished"); n != 1 {
			t.Errorf("jobs:vanished = %d", n)
		}
	})

	t.Run("never seen job gives up after NotFoundPolls", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		_, err := s.WaitJob(ctx, "987654", apiclient.WaitJobOptions{Interval: time.Second, NotFoundPolls: 3})
		if !errors.Is(err, apiclient.ErrJobNotFound) {
			t.Fatalf("err = %v", err)
		}
		if w := b.sleep.Waits(); len(w) != 2 {
			t.Errorf("waits = %v, want 2 (3 polls)", w)
		}
	})

	t.Run("job of another cluster is not found", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		script := uploadScript(t, s, "/jobs/a", "echo a\n")
		id, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("a", script))
		if err != nil {
			t.Fatal(err)
		}
		other, err := b.client.Cluster(ctx, "cluster-b")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Job(ctx, id); !errors.Is(err, apiclient.ErrJobNotFound) {
			t.Errorf("err = %v, want ErrJobNotFound", err)
		}
	})
}

func TestComputeJobLenientDetail(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hpc/openapi/v2/jobs/77" {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"code":0,"msg":null,"data":{"jobId":77,"jobName":"n","jobStatus":"statC",
					"jobEndTime":"2026-11-22 10:00:00","exitCode":0,"procNumUsed":"8","gpuNumUsed":null,
					"nodeNumReq":2.0,"dcuNumUsed":null,"jobInitAttr":{"JobState":"COMPLETED","nodect":2,"x":null},
					"scale":{"a":1},"unknownField":[1,2]}}`)
				return
			}
			h.ServeHTTP(w, r)
		})
	}})
	s := b.session(t)
	d, err := s.Job(context.Background(), "77")
	if err != nil {
		t.Fatal(err)
	}
	if d.JobID != "77" || d.ExitCode == nil || *d.ExitCode != "0" || d.ProcNumUsed != 8 || d.NodeNumReq != 2 ||
		d.JobInitAttr["nodect"] != "2" || string(d.Scale) != `{"a":1}` || apiclient.JobPhaseOf(d) != apiclient.JobSucceeded {
		t.Errorf("detail = %+v", d)
	}
}

// TestComputeErrorsRedactOnlySecrets: a refused job's message keeps what the
// user needs to fix it (the user name in a path) and loses what is secret
// (the password and the tokens), whatever upstream echoes.
func TestComputeErrorsRedactOnlySecrets(t *testing.T) {
	t.Parallel()
	var tokens atomic.Value // []string, set once the client holds them
	echo := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/ECHO/job") {
				next.ServeHTTP(w, r)
				return
			}
			toks, _ := tokens.Load().([]string)
			msg := "GAP_SCHED_FILE /home/" + computeUser + "/run.sh does not exist; login " + computeUser +
				" with password " + computePassword + " and token " + strings.Join(toks, ",")
			_, _ = io.WriteString(w, `{"code":"`+apisim.ComputeCodeInvalid+`","msg":"`+msg+`","data":null}`)
		})
	}
	b := setupCompute(t, computeOpts{wrap: echo})
	s := b.session(t)
	toks := b.currentTokens(t)
	tokens.Store(toks)
	ctx := context.Background()

	// The simulator's own refusal of a script under the user's home.
	missing := "/home/" + computeUser + "/run.sh"
	_, err := s.SubmitJob(ctx, "BASIC", "BASE", computeJobRequest("bad", missing))
	if err == nil || !strings.Contains(err.Error(), "GAP_SCHED_FILE "+missing+" does not exist") {
		t.Errorf("err = %v, want the script path %s verbatim", err, missing)
	}

	// An upstream that echoes every credential.
	_, err = s.SubmitJob(ctx, "BASIC", "ECHO", computeJobRequest("bad", missing))
	if err == nil {
		t.Fatal("echoing submit: no error")
	}
	computeNoSecret(t, err, toks...)
	for _, want := range []string{missing, "login " + computeUser, "password [redacted]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to keep %q", err, want)
		}
	}
}
