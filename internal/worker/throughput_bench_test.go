package worker_test

import (
	"context"
	"fmt"
	"io"
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
	nt := startBenchWorker(b, 64<<10, func(c *config.Config) { c.PollFirst = 5 * time.Millisecond })
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
	nt, s3 := testenv.StartNATS(b), testenv.StartS3(b)
	sim := httptest.NewServer(apisim.NewMedia(apisim.MediaConfig{APIKey: "k", ResultSize: resultSize}))
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
