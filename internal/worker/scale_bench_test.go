package worker_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
)

// BenchmarkHeldTasks holds b.N long video tasks in an in-process worker and
// reports the memory each costs once all are submitted: Go heap in use,
// goroutine stacks and goroutines per task (NATS, the S3 store and the
// simulator share the process, so the figures are upper bounds). It is the
// in-process twin of the harness's P3: run it with -benchtime 10000x.
func BenchmarkHeldTasks(b *testing.B) {
	nt := startBenchWorker(b, 1<<10, func(c *config.Config) { c.MaxInflight = max(b.N, 1) })
	var submitted atomic.Int64
	sub, err := nt.Conn.Subscribe(contract.EventSubject("video", "submitted"), func(*nats.Msg) { submitted.Add(1) })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g0 := runtime.NumGoroutine()
	var m0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)

	var peakStack, peakHeap atomic.Uint64
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for ctx.Err() == nil && submitted.Load() < int64(b.N) {
			runtime.ReadMemStats(&ms)
			peakStack.Store(max(peakStack.Load(), ms.StackInuse))
			peakHeap.Store(max(peakHeap.Load(), ms.HeapInuse))
			time.Sleep(100 * time.Millisecond)
		}
	}()
	b.ResetTimer()
	publishBenchJobs(b, nt, b.N, "[sim:duration=1h]")
	for deadline := time.Now().Add(5 * time.Minute); submitted.Load() < int64(b.N); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks submitted after 5 minutes", submitted.Load(), b.N)
		}
	}
	b.StopTimer()
	<-sampled
	// Let every task reach its first polls, then measure after GCs.
	time.Sleep(4 * time.Second)
	// Go shrinks a parked goroutine's stack by half per collection: a few
	// collections show the steady state of a worker that has run a while.
	var m1 runtime.MemStats
	for range 4 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m1)
	n := float64(b.N)
	b.ReportMetric((float64(m1.HeapInuse)-float64(m0.HeapInuse))/n, "heap-B/task")
	b.ReportMetric((float64(m1.StackInuse)-float64(m0.StackInuse))/n, "stack-B/task")
	b.ReportMetric(float64(runtime.NumGoroutine()-g0)/n, "goroutines/task")
	b.ReportMetric(float64(peakStack.Load())/(1<<20), "peak-stack-MiB")
	b.ReportMetric(float64(peakHeap.Load())/(1<<20), "peak-heap-MiB")
}
