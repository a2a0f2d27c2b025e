package worker_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// enqueue runs the enqueue binary against b's NATS and returns its output
// and exit code.
func (b *bundle) enqueue(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(enqueueBin, append(args, "--nats-url", cmp.Or(b.enqueueURL, b.nats.URL))...)
	cmd.Env = append(os.Environ(), b.enqueueEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	return out.String(), 0
}

// TestEnqueueAgainstWorker drives the real CLI against a real worker: every
// kind with --wait, a failure, a cancel while running, status.
func TestEnqueueAgainstWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)

	out, code := b.enqueue(t, "", "video", "--id", "cli-video", "--model", "m", "--prompt", "from the cli",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9", "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "s3://"+b.s3.Bucket+"/sluice/video/cli-video/result-0.mp4") {
		t.Fatalf("video --wait: exit %d\n%s", code, out)
	}

	var nd strings.Builder
	for _, mode := range []string{"sync", "async", "stream"} {
		spec, _ := json.Marshal(speechSpec("cli-speech-"+mode, "line "+mode, mode))
		nd.Write(spec)
		nd.WriteByte('\n')
	}
	nd.WriteString(`{"id":"cli-video-2","kind":"video","video":{"model":"m","input":{"prompt":"x"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}` + "\n")
	out, code = b.enqueue(t, nd.String(), "submit", "-f", "-", "--wait", "--timeout", "60s", "--json")
	if code != 0 || !strings.Contains(out, `"published":4`) {
		t.Fatalf("submit --wait: exit %d\n%s", code, out)
	}

	out, code = b.enqueue(t, "", "video", "--id", "cli-fail", "--model", "m", "--prompt", "no [sim:fail=blocked]",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9", "--wait", "--timeout", "60s")
	if code != 1 || !strings.Contains(out, "blocked") {
		t.Fatalf("failed job: exit %d\n%s", code, out)
	}

	// Cancel a running job from a second process while the first waits.
	wait := exec.Command(enqueueBin, "video", "--id", "cli-cancel", "--model", "m", "--prompt", "long [sim:duration=5m]",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9", "--wait", "--timeout", "60s", "--nats-url", b.nats.URL)
	var waitOut bytes.Buffer
	wait.Stdout, wait.Stderr = &waitOut, &waitOut
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	b.awaitStatus(t, "cli-cancel", state.StatusRunning, 30*time.Second)
	if out, code := b.enqueue(t, "", "cancel", "cli-cancel"); code != 0 {
		t.Fatalf("cancel: exit %d\n%s", code, out)
	}
	err := wait.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("waiting on a cancelled job: %v\n%s", err, waitOut.String())
	}

	out, code = b.enqueue(t, "", "status", "cli-video", "--json")
	var st struct {
		Status    string           `json:"status"`
		Artifacts []state.Artifact `json:"artifacts"`
	}
	if code != 0 || json.Unmarshal([]byte(strings.TrimSpace(out)), &st) != nil || st.Status != "succeeded" || len(st.Artifacts) != 1 {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	if _, code := b.enqueue(t, "", "status", "no-such-job"); code != 6 {
		t.Errorf("status of an unknown job: exit %d", code)
	}
}

// TestDeliveryLimitFailsAndDeadLetters: a job redelivered past
// SLUICE_MAX_DELIVER ends failed and dead-lettered instead of looping.
func TestDeliveryLimitFailsAndDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.media.Faults().Set(apisim.EndpointVideoSubmit, apisim.Fault{Error429Rate: 1, RetryAfter: time.Second})
	b.start(t, func(c *config.Config) { c.MaxDeliver = 2 })
	b.publish(t, "video", "limit-1", videoSpec("limit-1", "always throttled"))
	ev := b.await(t, "limit-1", 90*time.Second)
	if ev.Data.Status != "failed" || ev.Data.Error.Code != runner.CodeTooManyDeliveries {
		t.Fatalf("event = %+v", ev.Data.Error)
	}
	found := false
	for _, m := range b.deadLetters(t) {
		found = found || m.Header.Get("Sluice-Job-Id") == "limit-1"
	}
	if !found {
		t.Error("job past the delivery limit was not dead-lettered")
	}
	if n := b.media.SubmitCount("always throttled"); n != 0 {
		t.Errorf("throttled submits created %d tasks", n)
	}
}

// TestMutualTLS: against a NATS server that requires mutual TLS, the worker
// and enqueue connect with SLUICE_NATS_TLS_CA, _CERT and _KEY and run a job
// to success; enqueue without the client certificate, or trusting another
// CA, is refused with an error naming the variables to set.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	files := testenv.NewTLSFiles(t, "nats")
	b := setup(t, setupOpts{nats: testenv.NATSOptions{TLS: files, MutualTLS: true}})
	b.start(t)
	out, code := b.enqueue(t, "", "video", "--id", "tls-video", "--model", "m", "--prompt", "over mutual TLS",
		"--resolution", "768P", "--duration", "5", "--ratio", "16:9", "--wait", "--timeout", "60s")
	if code != 0 || !strings.Contains(out, "s3://"+b.s3.Bucket+"/sluice/video/tls-video/result-0.mp4") {
		t.Fatalf("video --wait over mutual TLS: exit %d\n%s", code, out)
	}

	full := b.enqueueEnv
	b.enqueueEnv = full[:1] // the CA only
	out, code = b.enqueue(t, "", "status", "tls-video")
	if code != 5 || !strings.Contains(out, "SLUICE_NATS_TLS_CERT and SLUICE_NATS_TLS_KEY") {
		t.Errorf("without a client certificate: exit %d\n%s", code, out)
	}
	other := testenv.NewTLSFiles(t, "other")
	b.enqueueEnv = append([]string{"SLUICE_NATS_TLS_CA=" + other.CA}, full[1:]...)
	out, code = b.enqueue(t, "", "status", "tls-video")
	if code != 5 || !strings.Contains(out, "not signed by a CA in SLUICE_NATS_TLS_CA="+other.CA) {
		t.Errorf("trusting another CA: exit %d\n%s", code, out)
	}
	b.enqueueEnv = full[1:2] // a certificate without its key
	out, code = b.enqueue(t, "", "status", "tls-video")
	if code != 2 || !strings.Contains(out, "SLUICE_NATS_TLS_CERT is set but SLUICE_NATS_TLS_KEY is not") {
		t.Errorf("a certificate without its key: exit %d\n%s", code, out)
	}
}
