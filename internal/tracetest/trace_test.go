package tracetest

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/cli"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/worker"
)

// TestJobTraceInJaeger publishes a video job with enqueue, inside a
// pipeline's trace (TRACEPARENT), to a worker on an embedded NATS, the S3
// store and the media simulator, both exporting to Jaeger, and reads the
// traces back from Jaeger's query API: the producer's span of service
// sluice-enqueue, a child of the pipeline's span; the job's trace of
// service sluice-worker with its steps; and the reference (an OpenTelemetry
// link) from the job's process span to the producer's span.
func TestJobTraceInJaeger(t *testing.T) {
	j := startJaeger(t, jaegerBinary(t))
	// Both read the exporter's settings from the process's environment.
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", j.OTLP+"/v1/traces")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	n := testenv.StartNATS(t)
	stop := startWorker(t, n)
	ctx := testenv.Context(t, 3*time.Minute)

	const pipelineTrace, pipelineSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	enqueue(ctx, t, n, `{"id":"traced-1","kind":"video","video":{"model":"m","input":{"prompt":"a lantern"},`+
		`"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`,
		"00-"+pipelineTrace+"-"+pipelineSpan+"-01")
	evs, err := n.JS.Stream(ctx, contract.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	last, err := evs.GetLastMsgForSubject(ctx, contract.EventSubject("video", "succeeded"))
	if err != nil {
		t.Fatal(err)
	}
	jobTrace := traceIDOf(last.Header.Get("traceparent"))
	if jobTrace == "" {
		t.Fatalf("terminal event traceparent = %q", last.Header.Get("traceparent"))
	}
	stop() // flushes the worker's spans

	producer := j.awaitTrace(ctx, t, pipelineTrace, "send sluice.jobs.video")
	send, _ := producer.span("send sluice.jobs.video")
	if got := producer.service(send); got != "sluice-enqueue" {
		t.Errorf("send span service = %q, want sluice-enqueue", got)
	}
	if !slices.Contains(send.References, apiReference{RefType: "CHILD_OF", TraceID: pipelineTrace, SpanID: pipelineSpan}) {
		t.Errorf("send span references = %+v, want CHILD_OF the pipeline's span", send.References)
	}

	steps := []string{"process sluice.jobs.video", "decode and validate", "preflight", "wait", "copy result-0.mp4",
		"publish sluice.events.video.submitted", "publish sluice.events.video.succeeded", "ack sluice.jobs.video"}
	job := j.awaitTrace(ctx, t, jobTrace, steps...)
	process, _ := job.span("process sluice.jobs.video")
	link := apiReference{RefType: "FOLLOWS_FROM", TraceID: pipelineTrace, SpanID: send.SpanID}
	if len(process.References) != 1 || process.References[0] != link {
		t.Errorf("process span references = %+v, want only %+v (the link to the producer's span)", process.References, link)
	}
	for _, s := range job.Spans {
		if got := job.service(s); got != "sluice-worker" {
			t.Errorf("span %q of the job's trace: service %q, want sluice-worker", s.OperationName, got)
		}
		if s.SpanID != process.SpanID && !childOfSome(s, job) {
			t.Errorf("span %q is not under the process span: references %+v", s.OperationName, s.References)
		}
	}
	if !slices.ContainsFunc(job.Spans, func(s apiSpan) bool { return strings.HasPrefix(s.OperationName, "HTTP ") }) {
		t.Errorf("no upstream or S3 client span in the job's trace: %v", operations(job))
	}
}

// childOfSome reports whether s is the child of a span of tr.
func childOfSome(s apiSpan, tr *apiTrace) bool {
	for _, r := range s.References {
		if r.RefType != "CHILD_OF" || r.TraceID != tr.TraceID {
			continue
		}
		if slices.ContainsFunc(tr.Spans, func(p apiSpan) bool { return p.SpanID == r.SpanID }) {
			return true
		}
	}
	return false
}

// startWorker runs a worker for video jobs on n, the S3 store and the
// media simulator, exporting traces as the OTEL_* variables say, and
// returns the function that stops it and flushes its spans.
func startWorker(t *testing.T, n *testenv.NATS) (stop func()) {
	t.Helper()
	s3 := testenv.StartS3(t)
	media := apisim.NewMedia(apisim.MediaConfig{APIKey: "media-key", TaskDuration: 300 * time.Millisecond,
		PendingFor: 100 * time.Millisecond, ResultSize: 64 << 10})
	sim := httptest.NewServer(media)
	t.Cleanup(sim.Close)
	tcfg, err := config.TracingFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Config{
		DataDir: t.TempDir(), NATSURL: n.URL, Kinds: []string{"video"},
		S3Endpoint: s3.Endpoint, S3Region: "us-east-1", S3Bucket: s3.Bucket, S3Prefix: "sluice", S3PathStyle: true,
		S3AccessKeyID: "sluice", S3SecretAccessKey: "s3-secret",
		MediaBaseURL: sim.URL, MediaAPIKey: "media-key",
		MaxInflight: 8, PollInterval: 200 * time.Millisecond, PollFirst: 50 * time.Millisecond,
		AllowPrivateURLs: true, MaxArtifactBytes: 64 << 20,
		HTTPAddr: "127.0.0.1:0", LogLevel: "debug", LogFormat: "json", ShutdownTimeout: 10 * time.Second,
		WorkerName: "trace-worker", AckWait: 5 * time.Second, MaxDeliver: 10, TaskTimeout: time.Minute,
		ComputeTimeout: time.Minute, MediaConcurrency: 8, MediaRate: 500, ComputeConc: 8, ComputeRate: 500,
		CopyConcurrency: 4, PartSize: 5 << 20, NATSReplicas: 1, EventsMaxAge: time.Hour, StateTTL: time.Hour,
		PresignTTL: time.Hour, S3CreateBucket: true, NATSMoveAfter: 10 * time.Second, SweepInterval: 200 * time.Millisecond,
		ComputePoll: 100 * time.Millisecond, DevSimTaskTime: time.Second, DevSimComputeTime: time.Second,
		Tracing: tcfg,
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &testenv.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- worker.Run(ctx, cfg, logging.New(logs, "json", "debug"), func(worker.Endpoints) { close(ready) })
	}()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			out := logs.String()
			t.Logf("worker logs (last 20 KiB):\n%s", out[max(0, len(out)-20<<10):])
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("worker did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not start in 30s")
	}
	return stop
}

// enqueue runs "enqueue submit --wait" with spec on stdin inside the trace
// that traceparent names (TRACEPARENT), and fails the test unless the job
// succeeded; enqueue flushes its spans before it waits.
func enqueue(ctx context.Context, t *testing.T, n *testenv.NATS, spec, traceparent string) {
	t.Helper()
	vars := map[string]string{
		"SLUICE_NATS_URL": n.URL, "TRACEPARENT": traceparent,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
	}
	var stdout, stderr bytes.Buffer
	env := cli.Env{
		Stdin: strings.NewReader(spec), Stdout: &stdout, Stderr: &stderr,
		Getenv:     func(k string) string { return vars[k] },
		IsTerminal: func(io.Writer) bool { return false },
		Now:        time.Now,
		Rand:       strings.NewReader(""),
	}
	if code := cli.Run(ctx, []string{"submit", "-f", "-", "--wait", "--timeout", "2m"}, env); code != cli.ExitOK {
		t.Fatalf("enqueue submit: exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
}
