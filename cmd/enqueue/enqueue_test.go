package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// binary is the enqueue command built by TestMain.
var binary string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "enqueue-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "enqueue")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build enqueue: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// result is how a run of the binary ended.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// command prepares a run of the binary against the NATS server at url
// ("" leaves SLUICE_NATS_URL unset).
func command(ctx context.Context, url string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, binary, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SLUICE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if url != "" {
		cmd.Env = append(cmd.Env, "SLUICE_NATS_URL="+url)
	}
	if raceEnabled {
		// A race-enabled binary otherwise sleeps a second before exiting.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0 halt_on_error=1")
	}
	return cmd
}

// enqueue runs the binary to its end with stdin.
func enqueue(t *testing.T, url, stdin string, args ...string) result {
	t.Helper()
	ctx := testenv.Context(t, 90*time.Second)
	cmd := command(ctx, url, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run enqueue %v: %v", args, err)
	}
	return r
}

// want fails the test unless r ended with code and every fragment is in
// its stdout or stderr.
func (r result) want(t *testing.T, code int, fragments ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got %s", code, r)
	}
	for _, f := range fragments {
		if !strings.Contains(r.stdout+r.stderr, f) {
			t.Errorf("output lacks %q:\n%s", f, r)
		}
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("output shows a URL signature:\n%s", r)
	}
}

// videoSpec returns a valid video spec; id and outcome are left out when
// empty.
func videoSpec(id, outcome string) string {
	m := map[string]any{
		"kind": "video",
		"video": map[string]any{
			"model":      "video-model",
			"input":      map[string]any{"prompt": "a paper boat drifting down a rain gutter"},
			"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
		},
	}
	if id != "" {
		m["id"] = id
	}
	if outcome != "" {
		m["labels"] = map[string]string{"outcome": outcome}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// jobsInStream returns how many messages SLUICE_JOBS holds (-1 when it
// does not exist).
func jobsInStream(t *testing.T, n *testenv.NATS) int {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	s, err := n.JS.Stream(ctx, contract.JobsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(info.State.Msgs)
}

// videoArgs is a valid video command.
func videoArgs(id, outcome string, more ...string) []string {
	args := []string{"video", "--model", "video-model", "--prompt", "a paper boat", "--resolution", "768P",
		"--duration", "5", "--ratio", "16:9", "--id", id, "--label", "outcome=" + outcome}
	return append(args, more...)
}

func TestBulkSubmitDeduplicatesReruns(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintln(&b, videoSpec(fmt.Sprintf("bulk-%04d", i), ""))
	}
	file := writeFile(t, "jobs.ndjson", b.String())

	enqueue(t, n.URL, "", "submit", "-f", file).want(t, 0, "1000 published, 0 duplicates")
	if got := jobsInStream(t, n); got != 1000 {
		t.Fatalf("stream holds %d jobs, want 1000", got)
	}

	ctx := testenv.Context(t, 10*time.Second)
	s, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := jobspec.Decode(m.Data, "video")
	if err != nil {
		t.Fatalf("published spec: %v", err)
	}
	if got := m.Header.Get(contract.HeaderMsgID); got != spec.ID || m.Subject != "sluice.jobs.video" {
		t.Errorf("message %s has Nats-Msg-Id %q for spec id %q", m.Subject, got, spec.ID)
	}

	r := enqueue(t, n.URL, "", "submit", "-f", file, "--json")
	r.want(t, 0)
	var rep struct {
		Published, Duplicates, Failed, Invalid int
		Jobs                                   []struct {
			ID        string
			Duplicate bool
			Line      int
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r)
	}
	if rep.Published != 0 || rep.Duplicates != 1000 || len(rep.Jobs) != 1000 || !rep.Jobs[999].Duplicate || rep.Jobs[999].Line != 1000 {
		t.Errorf("rerun: %+v", rep)
	}
	if got := jobsInStream(t, n); got != 1000 {
		t.Fatalf("after the rerun the stream holds %d jobs, want 1000", got)
	}
}

func TestSubmitGeneratesMissingIDs(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	in := videoSpec("", "") + "\n\n" + videoSpec("", "") + "\n"
	enqueue(t, n.URL, in, "submit", "-f", "-").want(t, 0, "2 published, 0 duplicates")

	ctx := testenv.Context(t, 10*time.Second)
	s, err := n.JS.Stream(ctx, contract.JobsStream)
	if err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(`^video-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{16}$`)
	ids := map[string]bool{}
	for seq := uint64(1); seq <= 2; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := jobspec.Decode(m.Data, "video")
		if err != nil {
			t.Fatalf("published spec: %v", err)
		}
		if !pattern.MatchString(spec.ID) || m.Header.Get(contract.HeaderMsgID) != spec.ID {
			t.Errorf("spec id %q, Nats-Msg-Id %q", spec.ID, m.Header.Get(contract.HeaderMsgID))
		}
		ids[spec.ID] = true
	}
	if len(ids) != 2 {
		t.Errorf("ids not distinct: %v", ids)
	}
	// Without ids a rerun makes new jobs: the documented price.
	enqueue(t, n.URL, in, "submit", "-f", "-").want(t, 0, "2 published, 0 duplicates")
	if got := jobsInStream(t, n); got != 4 {
		t.Errorf("stream holds %d jobs, want 4", got)
	}
}

func TestSubmitInvalidSpecs(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	lines := []string{
		videoSpec("ok-1", ""), // line 1
		"",                    // line 2
		strings.Replace(videoSpec("bad-3", ""), `"duration":5`, `"duration":99`, 1), // line 3
		videoSpec("ok-4", ""), // line 4
		strings.Replace(videoSpec("bad-5", ""), `"kind"`, `"vidoe":1,"kind"`, 1), // line 5
		videoSpec("ok-1", ""), // line 6: repeats line 1's id
	}
	file := writeFile(t, "jobs.ndjson", strings.Join(lines, "\n"))

	enqueue(t, n.URL, "", "submit", "-f", file).want(t, 2,
		"3 invalid spec(s); nothing was published",
		"line 3 (id bad-3): video.parameters.duration",
		"line 5 (id bad-5)", "vidoe",
		"line 6 (id ok-1): id: repeats the id of the spec on line 1")
	if got := jobsInStream(t, n); got != -1 {
		t.Fatalf("the stream exists with %d jobs; nothing should have been published", got)
	}

	r := enqueue(t, n.URL, "", "submit", "-f", file, "--json")
	r.want(t, 2)
	var rep struct {
		Published    int
		InvalidSpecs []struct {
			Line     int
			ID       string
			Problems []struct{ Path, Rule string }
		} `json:"invalid_specs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r)
	}
	if len(rep.InvalidSpecs) != 3 || rep.InvalidSpecs[0].Line != 3 ||
		rep.InvalidSpecs[0].Problems[0].Path != "video.parameters.duration" || rep.InvalidSpecs[2].Line != 6 {
		t.Errorf("invalid_specs: %+v", rep.InvalidSpecs)
	}

	enqueue(t, n.URL, "", "submit", "-f", file, "--skip-invalid").want(t, 0,
		"skipping 3 invalid spec(s)", "2 published, 0 duplicates, 3 invalid skipped")
	if got := jobsInStream(t, n); got != 2 {
		t.Errorf("stream holds %d jobs, want 2", got)
	}
}

func TestSubmitSingleMultiLineSpec(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(videoSpec("pretty-1", "")), "", "  "); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, "spec.json", pretty.String())
	enqueue(t, n.URL, "", "submit", "-f", file).want(t, 0, "published video job pretty-1")
	enqueue(t, n.URL, "", "submit", "-f", file).want(t, 0, "video job pretty-1 was already published", "duplicate")
	if got := jobsInStream(t, n); got != 1 {
		t.Errorf("stream holds %d jobs, want 1", got)
	}
}

func TestWaitSucceeded(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	startFakeWorker(t, n)

	enqueue(t, n.URL, "", videoArgs("clip-ok", "succeed", "--wait", "--timeout", "60s")...).want(t, 0,
		"published video job clip-ok",
		"clip-ok  succeeded",
		"s3://media/sluice/video/clip-ok/result-0.mp4  1048576 bytes  sha256 9f86d081",
		"1 succeeded, 0 failed, 0 cancelled, 0 unfinished")

	// The same id again: a duplicate, and --wait finds the job already
	// ended.
	r := enqueue(t, n.URL, "", videoArgs("clip-ok", "succeed", "--wait", "--json")...)
	r.want(t, 0)
	var rep struct {
		Duplicates int
		Wait       struct {
			Outcome string
			Counts  struct{ Total, Succeeded int }
			Jobs    []map[string]any
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, r)
	}
	if rep.Duplicates != 1 || rep.Wait.Outcome != "succeeded" || rep.Wait.Counts.Succeeded != 1 || len(rep.Wait.Jobs) != 1 {
		t.Fatalf("rerun report: %+v", rep)
	}
	job := rep.Wait.Jobs[0]
	arts, _ := job["artifacts"].([]any)
	if job["job_id"] != "clip-ok" || job["status"] != "succeeded" || len(arts) != 1 {
		t.Errorf("job: %v", job)
	}
	if src := arts[0].(map[string]any)["source"]; src != "https://cdn.example.test/out/clip-ok.mp4" {
		t.Errorf("artifact source %v, want it without its query", src)
	}
}

func TestWaitFindsJobEndedBeforeItsEvent(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	store := setUp(t, n)
	// A job that ended with no event in the window: only its state record
	// says so.
	ctx := testenv.Context(t, 10*time.Second)
	if _, err := store.Update(ctx, "old-job", func(r *state.Record) error {
		r.Kind, r.Status, r.Attempts = "video", state.StatusSucceeded, 1
		succeed(r, "video")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	enqueue(t, n.URL, "", "submit", "-f", "-", "--wait", "--timeout", "60s").want(t, 2, "no job spec")
	enqueue(t, n.URL, videoSpec("old-job", ""), "submit", "-f", "-", "--wait", "--timeout", "60s").want(t, 0,
		"old-job  succeeded", "s3://media/sluice/video/old-job/result-0.mp4")
}

func TestWaitFailed(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	startFakeWorker(t, n)
	enqueue(t, n.URL, "", videoArgs("clip-bad", "fail", "--wait")...).want(t, 1,
		"clip-bad  failed  InternalError (poll): the model fell over",
		"0 succeeded, 1 failed")
}

func TestWaitCancelledByCancelCommand(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	w := startFakeWorker(t, n)

	ctx := testenv.Context(t, 90*time.Second)
	waiting := command(ctx, n.URL, videoArgs("clip-hold", "hold", "--wait")...)
	var out, errb bytes.Buffer
	waiting.Stdout, waiting.Stderr = &out, &errb
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	for {
		rec, _, err := w.store.Get(ctx, "clip-hold")
		if err == nil && rec.Status == state.StatusRunning {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the job never ran")
		case <-time.After(10 * time.Millisecond):
		}
	}
	enqueue(t, n.URL, "", "cancel", "clip-hold").want(t, 0,
		"cancel requested for job clip-hold (status running)",
		"worker answered: cancel ")

	err := waiting.Wait()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	}
	r.want(t, 3, "clip-hold  cancelled", "0 succeeded, 0 failed, 1 cancelled")

	enqueue(t, n.URL, "", "cancel", "clip-hold").want(t, 0, "job clip-hold already cancelled; nothing to cancel")
}

func TestWaitMixedOutcomes(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	startFakeWorker(t, n)
	tests := []struct {
		name     string
		outcomes []string
		code     int
		outcome  string
	}{
		{"failed and cancelled", []string{"succeed", "fail", "cancel"}, 1, "failed"},
		{"cancelled", []string{"succeed", "cancel"}, 3, "cancelled"},
		{"all succeeded", []string{"succeed", "succeed"}, 0, "succeeded"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			for j, o := range tt.outcomes {
				fmt.Fprintln(&b, videoSpec(fmt.Sprintf("mix-%d-%d", i, j), o))
			}
			r := enqueue(t, n.URL, b.String(), "submit", "-f", "-", "--wait", "--json")
			r.want(t, tt.code)
			var rep struct {
				Published int
				Wait      struct {
					Outcome string
					Counts  struct{ Total, Succeeded, Failed, Cancelled int }
				}
			}
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("--json: %v\n%s", err, r)
			}
			c := rep.Wait.Counts
			if rep.Wait.Outcome != tt.outcome || c.Total != len(tt.outcomes) || c.Succeeded+c.Failed+c.Cancelled != c.Total {
				t.Errorf("report: %+v", rep)
			}
		})
	}
}

func TestWaitTimeout(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	setUp(t, n) // no worker runs
	enqueue(t, n.URL, "", videoArgs("clip-slow", "succeed", "--wait", "--timeout", "1s")...).want(t, 4,
		"clip-slow  queued  (not finished)", "timed out after 1s with 1 job(s) unfinished")
}

func TestWaitBeforeAnyWorker(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	enqueue(t, n.URL, "", videoArgs("clip-early", "succeed", "--wait", "--timeout", "1s")...).want(t, 4,
		"published video job clip-early",
		"no worker has set up sluice on this server yet; waiting for one")
	if got := jobsInStream(t, n); got != 1 {
		t.Errorf("stream holds %d jobs, want 1", got)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	enqueue(t, n.URL, "", "status", "nope").want(t, 6, "no worker has set up sluice on this server yet")

	startFakeWorker(t, n)
	enqueue(t, n.URL, "", videoArgs("clip-st", "succeed", "--wait")...).want(t, 0)

	enqueue(t, n.URL, "", "status", "clip-st").want(t, 0,
		"clip-st\n", "status     succeeded", "attempts   1",
		"task_id t-clip-st, request_id r-clip-st, status succeeded",
		"s3://media/sluice/video/clip-st/result-0.mp4  1048576 bytes  sha256 9f86d081")

	r := enqueue(t, n.URL, "", "status", "clip-st", "nope", "--json")
	r.want(t, 6)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 JSON lines, got %s", r)
	}
	var job map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &job); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"results", "terminal_event"} {
		if _, ok := job[k]; ok {
			t.Errorf("status --json shows %q: %s", k, lines[0])
		}
	}
	if job["status"] != "succeeded" || job["attempts"] != 1.0 || job["upstream"].(map[string]any)["task_id"] != "t-clip-st" {
		t.Errorf("status --json: %s", lines[0])
	}
	if lines[1] != `{"job_id":"nope","error":"no such job"}` {
		t.Errorf("unknown id: %s", lines[1])
	}
	enqueue(t, n.URL, "", "status", "nope").want(t, 6, "no such job nope")
}

// A cancel of an id that is neither recorded nor waiting in SLUICE_JOBS
// says "no such job" (exit 6) and invents no job: status still says "no
// such job". The cancel stays pending, so the job, published a moment
// later, ends cancelled without being submitted.
func TestCancelBeforeAnyWorker(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	enqueue(t, n.URL, "", "cancel", "ghost").want(t, 6,
		"no such job ghost: it is neither recorded nor waiting in SLUICE_JOBS", "pending for 10m0s")

	enqueue(t, n.URL, "", "status", "ghost", "--json").want(t, 6, `{"job_id":"ghost","error":"no such job"}`)

	r := enqueue(t, n.URL, "", "cancel", "ghost", "--json")
	r.want(t, 6)
	var res map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res["outcome"] != "no_such_job" || res["worker_reply"] != nil {
		t.Fatalf("cancel --json: %v\n%s", err, r)
	}

	// The job arrives a moment later: the worker ends it cancelled
	// without submitting it.
	startFakeWorker(t, n)
	enqueue(t, n.URL, "", videoArgs("ghost", "succeed", "--wait")...).want(t, 3, "ghost  cancelled")
}

// A published job that no worker has taken yet is "queued" for status
// (not "no such job"), and its cancel is recorded (exit 0).
func TestStatusAndCancelOfAQueuedJob(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	// No worker has ever run: the state bucket does not even exist.
	enqueue(t, n.URL, "", videoArgs("clip-q", "succeed")...).want(t, 0, "published video job clip-q")

	enqueue(t, n.URL, "", "status", "clip-q").want(t, 0, "clip-q\n", "kind       video", "status     queued")
	r := enqueue(t, n.URL, "", "status", "clip-q", "--json")
	r.want(t, 0)
	var job struct {
		Status          string
		Kind            string
		CancelRequested bool `json:"cancel_requested"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &job); err != nil || job.Status != "queued" || job.Kind != "video" || job.CancelRequested {
		t.Fatalf("status of a queued job: %v\n%s", err, r)
	}

	enqueue(t, n.URL, "", "cancel", "clip-q").want(t, 0, "cancel recorded; no worker has seen job clip-q yet")
	r = enqueue(t, n.URL, "", "status", "clip-q", "--json")
	r.want(t, 0)
	if err := json.Unmarshal([]byte(r.stdout), &job); err != nil || job.Status != "queued" || !job.CancelRequested {
		t.Fatalf("status of a cancelled queued job: %v\n%s", err, r)
	}
	// A mistyped id is no such job for both commands.
	enqueue(t, n.URL, "", "cancel", "clip-qq").want(t, 6, "no such job clip-qq")
	enqueue(t, n.URL, "", "status", "clip-qq").want(t, 6, "no such job clip-qq")
}

func TestWatch(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	enqueue(t, n.URL, "", "watch").want(t, 5, "no worker has set up sluice on this server yet")

	setUp(t, n)
	ctx := testenv.Context(t, 60*time.Second)
	pub := events.NewPublisher(n.JS)
	now := time.Now()
	for _, e := range []struct {
		id, kind string
		status   state.Status
	}{{"w-1", "video", state.StatusSubmitted}, {"w-2", "speech", state.StatusFailed}, {"w-1", "video", state.StatusSucceeded}} {
		rec := &state.Record{JobID: e.id, Kind: e.kind, Attempts: 1}
		switch e.status {
		case state.StatusSucceeded:
			succeed(rec, e.kind)
		case state.StatusFailed:
			rec.Error = &state.Error{Code: "timeout", Message: "gave up", Stage: state.StagePoll}
		}
		if err := pub.Publish(ctx, events.FromRecord(rec, e.status, now)); err != nil {
			t.Fatal(err)
		}
	}

	tests := []struct {
		name  string
		args  []string
		lines []string
	}{
		{"text", []string{"watch", "--since", "1h"}, []string{
			"w-1  video  submitted  attempt 1",
			"w-2  speech  failed  attempt 1  timeout (poll): gave up",
			"w-1  video  succeeded  attempt 1",
			"    s3://media/sluice/video/w-1/result-0.mp4  1048576 bytes  sha256 9f86d081",
		}},
		{"json of one kind", []string{"watch", "--since", "1h", "--kind", "video", "--json"}, []string{
			`"id":"w-1.submitted"`,
			`"source":"https://cdn.example.test/out/w-1.mp4"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := command(ctx, n.URL, tt.args...)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			var got []string
			for _, want := range tt.lines {
				for {
					if !sc.Scan() {
						t.Fatalf("output ended before %q; got %q, stderr %s", want, got, errb.String())
					}
					got = append(got, sc.Text())
					if strings.Contains(sc.Text(), want) {
						break
					}
				}
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(stdout)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("watch ended with %v after Ctrl-C; stderr %s", err, errb.String())
			}
			all := strings.Join(got, "\n") + string(rest)
			if strings.Contains(all, secret) {
				t.Errorf("watch shows a URL signature:\n%s", all)
			}
			if strings.Contains(tt.name, "json") {
				for _, l := range got {
					var ev events.Event
					if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.Data.Kind != "video" {
						t.Errorf("line %q: %v (kind %q)", l, err, ev.Data.Kind)
					}
				}
			}
		})
	}
}

func TestNATSUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	url := "nats://alice:hunter2@" + addr
	tests := []struct {
		name string
		env  string
		args []string
	}{
		{"flag", "", []string{"status", "x", "--nats-url", url}},
		{"environment", url, []string{"video", "--model", "m", "--prompt", "p", "--resolution", "768P", "--duration", "5", "--ratio", "16:9"}},
		{"list", "", []string{"cancel", "x", "--nats-url", url + ", nats://bob:pw@" + addr}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := enqueue(t, tt.env, "", tt.args...)
			r.want(t, 5, "cannot connect to NATS at nats://"+addr)
			if strings.Contains(r.stderr, "hunter2") || strings.Contains(r.stderr, "alice") || strings.Contains(r.stderr, ":pw@") {
				t.Errorf("the message shows credentials: %s", r)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		args      []string
		code      int
		fragments []string
	}{
		{"no command", nil, 2, []string{"Usage:", "Exit codes:"}},
		{"help", []string{"--help"}, 0, []string{"Commands:", "Examples:", "4    --timeout passed"}},
		{"command help", []string{"submit", "--help"}, 0, []string{"--skip-invalid", "Examples:", "DOES\nqueue every job again"}},
		{"help command", []string{"help", "watch"}, 0, []string{"--since", "Examples:"}},
		{"unknown command", []string{"frob"}, 2, []string{`unknown command "frob"`}},
		{"unknown flag", []string{"video", "--frob"}, 2, []string{"flag provided but not defined: --frob"}},
		{"missing fields", []string{"video", "--prompt", "p"}, 2, []string{
			"invalid video job", "--model (video.model): required", "--duration (video.parameters.duration)",
		}},
		{"mixed media", []string{"video", "--model", "m", "--prompt", "p", "--resolution", "768P", "--duration", "5",
			"--first-frame", "https://example.test/a.png", "--ref-image", "https://example.test/b.png"}, 2,
			[]string{"--ref-image (video.input.media[1])"}},
		{"bad label", []string{"video", "--label", "nolabel"}, 2, []string{"want key=value"}},
		{"bad template", []string{"compute", "--template", "BASIC"}, 2, []string{"--template: want TYPE/NAME"}},
		{"compute fields", []string{"compute", "--template", "BASIC/BASE"}, 2, []string{"--queue (compute.job.queue)", "--wall-time"}},
		{"speech mode", []string{"speech", "--model", "m", "--text", "t", "--voice", "v", "--mode", "loud"}, 2, []string{"--mode (speech.mode)"}},
		{"timeout without wait", append(videoArgs("x", "succeed"), "--timeout", "1s"), 2, []string{"--timeout needs --wait"}},
		{"submit without file", []string{"submit"}, 2, []string{"-f FILE is required"}},
		{"submit missing file", []string{"submit", "-f", "/nonexistent/jobs.ndjson"}, 2, []string{"no such file"}},
		{"status without ids", []string{"status"}, 2, []string{"at least one job id"}},
		{"bad id", []string{"cancel", "not an id"}, 2, []string{`"not an id" is not a job id`}},
		{"watch kind", []string{"watch", "--kind", "audio"}, 2, []string{"--kind: want video, speech, compute, container or pipeline"}},
		{"stray argument", []string{"watch", "extra"}, 2, []string{`unexpected argument "extra"`}},
		{"version", []string{"--version"}, 0, []string{"enqueue ", "(commit "}},
		{"nodes zero", []string{"compute", "--template", "BASIC/BASE", "--queue", "q", "--nodes", "0", "--ppn", "-2",
			"--wall-time", "01:00:00", "--script", "/s.sh"}, 2, []string{"--nodes: must be positive, got 0", "--ppn: must be positive, got -2"}},
		{"bad template and more", []string{"compute", "--template", "BASIC", "--input", "nodir", "--timeout", "1s"}, 2, []string{
			`--template: want TYPE/NAME, got "BASIC"`, "--input: want FROM=DIR", "--queue (compute.job.queue): required",
			"--wall-time (compute.job.wall_time)", "--timeout needs --wait",
		}},
		{"container fields", []string{"container", "--image", "reg/x:1", "--cpus", "0", "--mount", "nodst", "--script", "echo hi",
			"--script-file", "/nonexistent"}, 2, []string{
			"invalid container job", "--cpus: must be positive, got 0", "--mount: want SOURCE=TARGET",
			"--script-file: give --script (the text) or --script-file (a local file), not both",
			"--version (container.instance.version): required", "--instance-timeout (container.instance.timeout): required",
			"--ram-mb (container.instance.ram_mb): must be a positive integer", "--accelerator (container.instance.accelerator): required",
		}},
		{"container script file missing", []string{"container", "--script-file", "/nonexistent/train.sh"}, 2, []string{
			"--script-file /nonexistent/train.sh: no such file or directory",
		}},
		{"misspelt flag", []string{"video", "--modle", "m"}, 2, []string{"flag provided but not defined: --modle; did you mean --model?"}},
		{"misspelt command", []string{"stauts", "x"}, 2, []string{`unknown command "stauts"; did you mean status?`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			enqueue(t, "", "", tt.args...).want(t, tt.code, tt.fragments...)
		})
	}
}

// Help refers to the user's docs, never to the project's internal files.
func TestHelpNamesNoInternalFiles(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"video", "speech", "compute", "container", "submit", "status", "cancel", "watch"} {
		r := enqueue(t, "", "", cmd, "--help")
		r.want(t, 0)
		if strings.Contains(r.stdout, "CONTRACT") {
			t.Errorf("%s --help names CONTRACT.md:\n%s", cmd, r.stdout)
		}
	}
}

// A flag-built job that is invalid gives, with --json, the documented
// report on stdout: invalid_specs with every problem and its flag.
func TestBuiltJobJSONReport(t *testing.T) {
	t.Parallel()
	r := enqueue(t, "", "", "video", "--model", "m", "--prompt", "p", "--resolution", "4K", "--duration", "5", "--id", "clip-9", "--json")
	r.want(t, 2, "--resolution (video.parameters.resolution)")
	var rep struct {
		Published    *int `json:"published"`
		Invalid      int  `json:"invalid"`
		InvalidSpecs []struct {
			ID       string `json:"id"`
			Problems []struct{ Path, Rule, Flag string }
		} `json:"invalid_specs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, r)
	}
	if rep.Published == nil || *rep.Published != 0 || rep.Invalid != 1 || len(rep.InvalidSpecs) != 1 || rep.InvalidSpecs[0].ID != "clip-9" {
		t.Fatalf("report: %+v", rep)
	}
	var paths []string
	for _, p := range rep.InvalidSpecs[0].Problems {
		paths = append(paths, p.Flag+" "+p.Path)
	}
	if got := strings.Join(paths, ","); got != "--resolution video.parameters.resolution,--ratio video.parameters.ratio" {
		t.Errorf("problems: %s", got)
	}
}

// submit --skip-invalid --wait cannot exit 0 when lines were dropped.
func TestSkipInvalidWaitExitCode(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	startFakeWorker(t, n)
	lines := videoSpec("skip-ok", "succeed") + "\n" + strings.Replace(videoSpec("skip-bad", ""), `"duration":5`, `"duration":99`, 1) + "\n"
	enqueue(t, n.URL, lines, "submit", "-f", "-", "--skip-invalid", "--wait", "--timeout", "60s").want(t, 7,
		"skipping 1 invalid spec(s)", "skip-ok  succeeded", "1 invalid spec(s) were skipped")
	// Without --wait the publish itself succeeded: exit 0, as before.
	enqueue(t, n.URL, lines, "submit", "-f", "-", "--skip-invalid").want(t, 0, "1 invalid skipped")
}

func TestDryRun(t *testing.T) {
	t.Parallel()
	script := "#!/bin/bash\nset -e\npython3 train.py --epochs 3 'quoted arg'\n"
	scriptFile := filepath.Join(t.TempDir(), "train.sh")
	if err := os.WriteFile(scriptFile, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		kind jobspec.Kind
	}{
		{"video", []string{"video", "--model", "m", "--prompt", "p", "--resolution", "2K", "--duration", "8",
			"--first-frame", "s3://media/boat.png", "--last-frame", "https://example.test/end.png", "--watermark",
			"--label", "campaign=spring", "--prefix", "spring/clips"}, jobspec.KindVideo},
		{"speech", []string{"speech", "--model", "m", "--text", "hello", "--voice", "v", "--mode", "stream",
			"--language", "English", "--instructions", "slow", "--optimize-instructions"}, jobspec.KindSpeech},
		{"compute", []string{"compute", "--template", "BASIC/BASE", "--queue", "normal", "--nodes", "2", "--ppn", "32",
			"--wall-time", "36:00:00", "--script", "/home/alice/run.sh", "--input", "s3://hydro-in/basin.msh=/home/alice/run",
			"--cover-inputs", "--output", "/home/alice/run/result.nc", "--name", "hydro", "--cluster", "east",
			"--work-dir", "/home/alice/run", "--extra", "GAP_NGPU=1", "--id", "sim-1"}, jobspec.KindCompute},
		{"container", []string{"container", "--image", "registry:5000/gpu/admin/base/torch:2.1", "--version", "torch:2.1",
			"--accelerator", "gpu", "--resource-group", "TeslaM40", "--cpus", "4", "--gpus", "1", "--ram-mb", "16384",
			"--instance-timeout", "02:00:00", "--script-file", scriptFile, "--input", "s3://data/train.tar=/public/home/alice/run",
			"--output", "/public/home/alice/run/model.bin", "--mount", "/public/data=/data", "--cluster", "east",
			"--work-dir", "/public/home/alice/run", "--id", "train-1"}, jobspec.KindContainer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := enqueue(t, "", "", append(tt.args, "--dry-run")...)
			r.want(t, 0, "dry run: 1 valid spec(s)")
			spec, err := jobspec.Decode([]byte(strings.TrimSpace(r.stdout)), tt.kind)
			if err != nil {
				t.Fatalf("printed spec: %v\n%s", err, r)
			}
			if !jobspec.ValidID(spec.ID) {
				t.Errorf("id %q", spec.ID)
			}
			switch tt.kind {
			case jobspec.KindVideo:
				v := spec.Video
				if len(v.Input.Media) != 2 || v.Input.Media[0].Type != "first_frame" || v.Input.Media[1].Type != "last_frame" ||
					v.Parameters.Watermark == nil || !*v.Parameters.Watermark || spec.Output.Prefix != "spring/clips" ||
					spec.Labels["campaign"] != "spring" {
					t.Errorf("video spec: %s", r.stdout)
				}
			case jobspec.KindSpeech:
				s := spec.Speech
				if s.Mode != jobspec.ModeStream || s.Input.LanguageType != "English" || s.Input.OptimizeInstructions == nil {
					t.Errorf("speech spec: %s", r.stdout)
				}
			case jobspec.KindCompute:
				c := spec.Compute
				if spec.ID != "sim-1" || c.Template.Type != "BASIC" || c.Template.Name != "BASE" || c.Job.Nodes != 2 ||
					len(c.Inputs) != 1 || c.Inputs[0].To != "/home/alice/run" || !c.Inputs[0].Cover ||
					c.Job.Extra["GAP_NGPU"] != "1" || c.Cluster != "east" {
					t.Errorf("compute spec: %s", r.stdout)
				}
			case jobspec.KindContainer:
				c := spec.Container
				in := c.Instance
				if spec.ID != "train-1" || in.Image != "registry:5000/gpu/admin/base/torch:2.1" || in.Version != "torch:2.1" ||
					in.Accelerator != "gpu" || in.ResourceGroup != "TeslaM40" || in.CPUs != 4 || in.GPUs != 1 || in.RAMMB != 16384 ||
					in.Timeout != "02:00:00" || c.Script != script || len(c.Inputs) != 1 || c.Inputs[0].To != "/public/home/alice/run" ||
					len(c.Outputs) != 1 || len(in.Mounts) != 1 || in.Mounts[0].Target != "/data" || c.Cluster != "east" ||
					c.WorkDir != "/public/home/alice/run" {
					t.Errorf("container spec: %s", r.stdout)
				}
			}
		})
	}
}

func TestNoJetStream(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(srv.Shutdown)
	url := srv.ClientURL()
	for _, args := range [][]string{
		videoArgs("x", "succeed"),
		{"status", "x"},
		{"cancel", "x"},
		{"watch"},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			enqueue(t, url, "", args...).want(t, 5, "JetStream is not enabled on the NATS server")
		})
	}
}

// A compute job can be cancelled before and after its submit (the worker
// holding it deletes it upstream). The outcome is the same whether a
// worker answers the request (it sets the flag) or none runs (enqueue sets
// it).
func TestCancelSubmittedCompute(t *testing.T) {
	t.Parallel()
	for _, worker := range []bool{false, true} {
		t.Run(map[bool]string{false: "no worker", true: "through a worker"}[worker], func(t *testing.T) {
			t.Parallel()
			n := testenv.StartNATS(t)
			store := setUp(t, n)
			if worker {
				startFakeWorker(t, n)
			}
			ctx := testenv.Context(t, 30*time.Second)
			for id, status := range map[string]state.Status{"sim-queued": state.StatusReceived, "sim-running": state.StatusRunning} {
				if _, err := store.Update(ctx, id, func(r *state.Record) error {
					r.Kind, r.Status = "compute", status
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			enqueue(t, n.URL, "", "cancel", "sim-queued").want(t, 0, "cancel requested for job sim-queued (status received)")
			enqueue(t, n.URL, "", "cancel", "sim-running").want(t, 0, "cancel requested for job sim-running (status running)")
			for _, id := range []string{"sim-queued", "sim-running"} {
				rec, _, err := store.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if rec.Cancel == nil {
					t.Errorf("%s: no cancel flag", id)
				}
			}
		})
	}
}

// A worker that answers it could not record the cancel makes enqueue fail
// with its answer; enqueue does not record the cancel itself (it does not
// even create the state bucket).
func TestCancelWorkerCannotRecord(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	sub, err := n.Conn.Subscribe(contract.CancelSubject, func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"job_id":"clip-x","error":"cannot record the cancel: write state clip-x: no quorum"}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	enqueue(t, n.URL, "", "cancel", "clip-x").want(t, 5,
		"cancel clip-x: a worker answered: cannot record the cancel: write state clip-x: no quorum")
	if _, err := n.JS.KeyValue(testenv.Context(t, 10*time.Second), contract.StateBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Errorf("state bucket after a worker's answer: %v", err)
	}
}
