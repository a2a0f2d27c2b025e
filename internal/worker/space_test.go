package worker_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/cli"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/runner"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// setMaxBytes sets stream's max_bytes: its bytes now (full: every new
// message is refused) when full, else unlimited.
func (b *bundle) setMaxBytes(t *testing.T, stream string, full bool) {
	t.Helper()
	ctx := testenv.Context(t, 10*time.Second)
	s, err := b.nats.JS.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.Config
	cfg.MaxBytes = -1
	if full {
		cfg.MaxBytes = max(int64(info.State.Bytes), 1)
	}
	if _, err := b.nats.JS.UpdateStream(ctx, cfg); err != nil {
		t.Fatalf("set max_bytes of %s: %v", stream, err)
	}
}

// metric reads a sample of /metrics by its full name with labels.
func (b *bundle) metric(t *testing.T, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + b.ep.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return n
		}
	}
	return 0
}

// TestOutOfSpaceHoldsJobsAndTakesNoNew: with the state bucket and the
// events stream at their byte limits, the worker says once that JetStream
// is out of space and which limits are reached, shows it in /readyz and
// sluice_jetstream_out_of_space, and pulls no new job; the job it holds
// keeps its upstream task. Once the limits are raised, the worker takes
// jobs again on its own, and both jobs succeed with one submit each.
func TestOutOfSpaceHoldsJobsAndTakesNoNew(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 2 * time.Second})
	b.start(t, func(c *config.Config) { c.TaskTimeout = time.Hour })

	const heldPrompt, newPrompt = "a lighthouse on a full disk", "a harbour after the disk was cleared"
	b.publish(t, "video", "space-held", videoSpec("space-held", heldPrompt))
	b.awaitStatus(t, "space-held", state.StatusRunning, time.Minute)
	stateStream := "KV_" + contract.StateBucket
	b.setMaxBytes(t, stateStream, true)
	b.setMaxBytes(t, contract.EventsStream, true)

	// The held job's task ends: its terminal event (at the latest) is
	// refused, and the worker stops taking jobs.
	waitFor(t, time.Minute, "readyz to say JetStream is out of space", func() bool {
		code, body := b.readyz(t)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "JetStream out of space")
	})
	if v := b.metric(t, "sluice_jetstream_out_of_space"); v != 1 {
		t.Errorf("sluice_jetstream_out_of_space = %v, want 1", v)
	}
	b.publish(t, "video", "space-new", videoSpec("space-new", newPrompt))
	// The held job retries its write twice more while the new job waits
	// in the stream.
	refusals := func() float64 {
		return b.metric(t, `sluice_jetstream_failures_total{loop="event publishes",reason="no_space"}`) +
			b.metric(t, `sluice_jetstream_failures_total{loop="state writes",reason="no_space"}`)
	}
	seen := refusals()
	waitFor(t, time.Minute, "two more refused writes", func() bool { return refusals() >= seen+2 })
	if n := b.media.SubmitCount(newPrompt); n != 0 {
		t.Fatalf("submits of a new job while JetStream is out of space = %d, want 0", n)
	}
	if n := logLines(b, runner.LogWaitingForSpace, `"job_id":"space-held"`); n != 1 {
		t.Errorf("the held job said %d times that it waits for space, want once", n)
	}
	if n := logLines(b, "JetStream out of space: taking no new job", "max_bytes"); n != 1 {
		t.Errorf("out of space was logged %d times naming the limit, want once", n)
	}

	b.setMaxBytes(t, stateStream, false)
	b.setMaxBytes(t, contract.EventsStream, false)
	for _, id := range []string{"space-held", "space-new"} {
		if ev := b.await(t, id, 2*time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
			t.Fatalf("%s = %s %+v, want succeeded", id, ev.Data.Status, ev.Data.Error)
		}
	}
	for _, prompt := range []string{heldPrompt, newPrompt} {
		if n := b.media.SubmitCount(prompt); n != 1 {
			t.Errorf("submits of %q = %d, want 1", prompt, n)
		}
	}
	waitFor(t, time.Minute, "readyz to be ready again", func() bool { code, _ := b.readyz(t); return code == http.StatusOK })
	if v := b.metric(t, "sluice_jetstream_out_of_space"); v != 0 {
		t.Errorf("sluice_jetstream_out_of_space after space returned = %v, want 0", v)
	}
	if n := logLines(b, "JetStream has space again: taking jobs"); n != 1 {
		t.Errorf("space returning was logged %d times, want once", n)
	}
}

// TestEnqueueJobsStreamFull: a publish SLUICE_JOBS refuses at its byte
// limit gets a plain message naming the stream and the limit, and exit
// code 8; once the limit is raised, the same input publishes.
func TestEnqueueJobsStreamFull(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.publish(t, "video", "jobs-full-first", videoSpec("jobs-full-first", "the first of a full queue"))
	b.setMaxBytes(t, contract.JobsStream, true)

	spec, err := json.Marshal(videoSpec("jobs-full-second", "one too many"))
	if err != nil {
		t.Fatal(err)
	}
	out, code := b.enqueue(t, string(spec), "submit", "-f", "-")
	if code != cli.ExitJobsFull {
		t.Fatalf("enqueue into a full SLUICE_JOBS: exit %d, want %d\n%s", code, cli.ExitJobsFull, out)
	}
	for _, want := range []string{"SLUICE_JOBS is full", "max_bytes", "1 of 1 specs were not published"} {
		if !strings.Contains(out, want) {
			t.Errorf("enqueue output does not say %q:\n%s", want, out)
		}
	}

	b.setMaxBytes(t, contract.JobsStream, false)
	if out, code := b.enqueue(t, string(spec), "submit", "-f", "-"); code != cli.ExitOK {
		t.Fatalf("enqueue once SLUICE_JOBS has room: exit %d\n%s", code, out)
	}
}

// TestServerStoreFullHoldsJob: a server whose JetStream store is at its
// max_store (filled here by another stream) refuses the worker's writes,
// though no stream or account limit shows it; the worker says so, and the
// held job keeps its task until the other stream is deleted, then
// succeeds with one submit, and the worker takes jobs again.
func TestServerStoreFullHoldsJob(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{taskTime: 2 * time.Second, nats: testenv.NATSOptions{MaxStore: 4 << 20}})
	b.start(t, func(c *config.Config) { c.TaskTimeout = time.Hour })

	const heldPrompt, newPrompt = "a lighthouse on a full server", "a harbour on a freed server"
	b.publish(t, "video", "server-held", videoSpec("server-held", heldPrompt))
	b.awaitStatus(t, "server-held", state.StatusRunning, time.Minute)
	ctx := testenv.Context(t, time.Minute)
	if _, err := b.nats.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "FILLER", Subjects: []string{"filler.>"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 256<<10)
	for i := 0; ; i++ {
		_, err := b.nats.JS.Publish(ctx, "filler."+strconv.Itoa(i), chunk)
		if natsconn.NoSpace(err) {
			break
		}
		if err != nil {
			t.Fatalf("fill the server's store: %v", err)
		}
	}

	waitFor(t, time.Minute, "readyz to say JetStream is out of space", func() bool {
		code, body := b.readyz(t)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "JetStream out of space")
	})
	// The held job tries its write twice more, still refused; the worker
	// still takes nothing.
	refusals := func() float64 {
		return b.metric(t, `sluice_jetstream_failures_total{loop="event publishes",reason="no_space"}`) +
			b.metric(t, `sluice_jetstream_failures_total{loop="state writes",reason="no_space"}`)
	}
	seen := refusals()
	waitFor(t, time.Minute, "two more refused writes", func() bool { return refusals() >= seen+2 })
	if code, body := b.readyz(t); code != http.StatusServiceUnavailable || !strings.Contains(body, "server's own store") {
		t.Errorf("readyz while the server is full = %d %q, want 503 naming the server's store", code, body)
	}

	if err := b.nats.JS.DeleteStream(ctx, "FILLER"); err != nil {
		t.Fatal(err)
	}
	if ev := b.await(t, "server-held", 2*time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("server-held = %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	waitFor(t, time.Minute, "readyz to be ready again", func() bool { code, _ := b.readyz(t); return code == http.StatusOK })
	b.publish(t, "video", "server-new", videoSpec("server-new", newPrompt))
	if ev := b.await(t, "server-new", time.Minute); ev.Data.Status != string(state.StatusSucceeded) {
		t.Fatalf("server-new = %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	for _, prompt := range []string{heldPrompt, newPrompt} {
		if n := b.media.SubmitCount(prompt); n != 1 {
			t.Errorf("submits of %q = %d, want 1", prompt, n)
		}
	}
	if n := logLines(b, "JetStream out of space: taking no new job", "server's own store"); n != 1 {
		t.Errorf("out of space was logged %d times naming the server's store, want once", n)
	}
	if n := logLines(b, "JetStream has space again: taking jobs"); n != 1 {
		t.Errorf("space returning was logged %d times, want once", n)
	}
}
