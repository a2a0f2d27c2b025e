package apiclient_test

import (
	"context"
	"io"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// BenchmarkComputeUpload compares the single-request upload with the
// chunked one (burst + merge, 8 MiB chunks) for a 64 MiB source that
// announces its size, against the simulator over loopback. It reports
// throughput (MB/s) and the peak heap in use while uploading.
//
//	go test -run '^$' -bench BenchmarkComputeUpload -benchtime 5x ./internal/apiclient
func BenchmarkComputeUpload(b *testing.B) {
	const size = 64 << 20
	for _, chunk := range []int64{0, 8 << 20} {
		name := "single"
		if chunk > 0 {
			name = "chunked-" + strconv.FormatInt(chunk>>20, 10) + "MiB"
		}
		b.Run(name, func(b *testing.B) {
			cb := setupCompute(b, computeOpts{client: func(c *apiclient.ComputeConfig) { c.ChunkSize = chunk }})
			s, err := cb.client.Cluster(context.Background(), "")
			if err != nil {
				b.Fatal(err)
			}
			open := func() (io.ReadCloser, error) {
				return sizedSource{Reader: apisim.ResultBytes("bench", 0, size), size: size}, nil
			}
			var peak atomic.Uint64
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				var ms runtime.MemStats
				for {
					runtime.ReadMemStats(&ms)
					if ms.HeapInuse > peak.Load() {
						peak.Store(ms.HeapInuse)
					}
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			runtime.GC()
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				if err := s.Upload(context.Background(), "/bench", "in.bin", true, open); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			close(stop)
			<-done
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
		})
	}
}
