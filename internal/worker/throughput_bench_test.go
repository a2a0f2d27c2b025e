package worker_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/logging"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/worker"
)

// BenchmarkVideoJobs runs b.N video jobs (instant simulator task, one
// 64 KiB result) through an in-process worker, embedded NATS, the S3 store
// and the simulator over HTTP, and reports jobs/s and the CPU time of the
// whole process per job. It is the profiling twin of the harness's P1
// (cmd/bench): run it with -cpuprofile to see the whole job path.
func BenchmarkVideoJobs(b *testing.B) {
	runVideoJobs(b, startBenchWorker(b, 64<<10, func(c *config.Config) { c.PollFirst = 5 * time.Millisecond }))
}

// BenchmarkVideoJobsLimits is BenchmarkVideoJobs against an upstream that
// answers every call (submit, batch query, result download) after 10 ms,
// as a remote API does, with the per-worker limits that bound it: media
// requests at once (SLUICE_MEDIA_MAX_CONCURRENCY) and artifact copies at
// once (SLUICE_COPY_CONCURRENCY; four times as many small copies). It
// shows where each limit caps a worker's jobs/s (BENCHMARKS.md, "Per-worker
// limits").
func BenchmarkVideoJobsLimits(b *testing.B) {
	for _, l := range []struct{ media, copies int }{{8, 4}, {16, 4}, {32, 4}, {16, 1}, {16, 2}, {32, 8}, {64, 16}} {
		b.Run(fmt.Sprintf("media=%d/copy=%d", l.media, l.copies), func(b *testing.B) {
			sim := apisim.NewMedia(apisim.MediaConfig{APIKey: "k", ResultSize: 64 << 10})
			for _, e := range []string{apisim.EndpointVideoSubmit, apisim.EndpointTasks, apisim.EndpointTask, apisim.EndpointResult} {
				sim.Faults().Set(e, apisim.Fault{Latency: 10 * time.Millisecond})
			}
			runVideoJobs(b, startBenchWorkerWith(b, sim, func(c *config.Config) {
				c.PollFirst, c.MediaConcurrency, c.CopyConcurrency = 5*time.Millisecond, l.media, l.copies
			}))
		})
	}
}

// runVideoJobs publishes b.N instant video jobs to the worker on nt, waits
// for every terminal event, and reports jobs/s and the process's CPU time
// per job.
func runVideoJobs(b *testing.B, nt *testenv.NATS) {
	ended := make(chan string, 1<<16)
	sub, err := nt.Conn.Subscribe(contract.EventsSubjectPrefix+"video.*", func(m *nats.Msg) {
		if !strings.HasSuffix(m.Subject, ".submitted") && !strings.HasSuffix(m.Subject, ".running") {
			ended <- m.Subject
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)

	cpu0 := processCPU(b)
	b.ResetTimer()
	start := time.Now()
	publishBenchJobs(b, nt, b.N, "[sim:duration=0s]")
	for range b.N {
		select {
		case subject := <-ended:
			if !strings.HasSuffix(subject, ".succeeded") {
				b.Fatalf("a job ended with %s", subject)
			}
		case <-time.After(time.Minute):
			b.Fatal("no terminal event for a minute")
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/job")
}

// startBenchWorker starts embedded NATS, the S3 store, the media simulator
// (results of resultSize bytes) and an in-process worker serving video
// jobs with high limits, changed by mutate; it returns the NATS server the
// worker consumes from. Everything stops when the benchmark ends.
func startBenchWorker(b *testing.B, resultSize int64, mutate func(*config.Config)) *testenv.NATS {
	b.Helper()
	return startBenchWorkerWith(b, apisim.NewMedia(apisim.MediaConfig{APIKey: "k", ResultSize: resultSize}), mutate)
}

// startBenchWorkerWith is startBenchWorker with the media simulator media,
// served through front when one is given (a recorder of the calls).
func startBenchWorkerWith(b *testing.B, media *apisim.Media, mutate func(*config.Config), front ...func(http.Handler) http.Handler) *testenv.NATS {
	b.Helper()
	nt, s3 := testenv.StartNATS(b), testenv.StartS3(b)
	var h http.Handler = media
	for _, f := range front {
		h = f(h)
	}
	sim := httptest.NewServer(h)
	b.Cleanup(sim.Close)
	cfg, err := config.Parse()
	if err != nil {
		b.Fatal(err)
	}
	cfg.NATSURL, cfg.Kinds = nt.URL, []string{"video"}
	cfg.S3Endpoint, cfg.S3Bucket, cfg.S3PathStyle = s3.Endpoint, s3.Bucket, true
	cfg.S3AccessKeyID, cfg.S3SecretAccessKey = "k", "s"
	cfg.MediaBaseURL, cfg.MediaAPIKey, cfg.AllowPrivateURLs = sim.URL, "k", true
	cfg.HTTPAddr, cfg.WorkerName, cfg.MediaRate = "127.0.0.1:0", "bench", 100000
	mutate(cfg)
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		stopped <- worker.Run(ctx, *cfg, logging.New(io.Discard, "json", "info"), func(worker.Endpoints) { close(ready) })
	}()
	b.Cleanup(func() { cancel(); <-stopped })
	select {
	case <-ready:
	case err := <-stopped:
		b.Fatalf("worker: %v", err)
	}
	return nt
}

// publishBenchJobs publishes n video specs whose prompts carry directives.
func publishBenchJobs(b *testing.B, nt *testenv.NATS, n int, directives string) {
	b.Helper()
	for i := range n {
		id := fmt.Sprintf("bench-%06d", i)
		m := nats.NewMsg(contract.JobSubject("video"))
		m.Header.Set(contract.HeaderMsgID, id)
		m.Data = fmt.Appendf(nil, `{"id":%q,"kind":"video","video":{"model":"m","input":{"prompt":"a paper boat, job %s %s"},`+
			`"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`, id, id, directives)
		if _, err := nt.JS.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
		if i%1000 == 999 || i == n-1 {
			<-nt.JS.PublishAsyncComplete()
		}
	}
}

// processCPU is the user and system CPU time of this process so far: the
// worker, NATS, the store and the simulator together.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
