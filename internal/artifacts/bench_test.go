package artifacts

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// BenchmarkCopy copies a 64 MiB stream into the embedded S3 store and
// reports the throughput.
func BenchmarkCopy(b *testing.B) {
	const size = 64 * mib
	sb := setupStore(b, func(c *StoreConfig) { c.PartSize = 8 * mib })
	key, _ := sb.store.Key("", "video", "bench", "result.mp4")
	ctx := context.Background()
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		r, _ := stream(uint64(i), size)
		open := func(context.Context) (io.ReadCloser, string, string, error) {
			return io.NopCloser(r), "video/mp4", "bench", nil
		}
		if _, err := sb.store.Copy(ctx, key, size, open); err != nil {
			b.Fatalf("Copy: %v", err)
		}
	}
}

// BenchmarkPutMemory streams 1 GiB per operation into a sink that speaks
// the S3 wire protocol but keeps nothing, so that the process's memory is
// the Store's own, and reports the peak heap in use and the peak RSS.
// Run it alone: go test -run '^$' -bench PutMemory -benchtime 1x.
func BenchmarkPutMemory(b *testing.B) {
	const size = 1 << 30
	sink := newSinkS3(b)
	client := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(sink.URL),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
	s, err := NewStore(StoreConfig{Client: client, Bucket: "sink"})
	if err != nil {
		b.Fatalf("NewStore: %v", err)
	}
	ctx := context.Background()
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var ms runtime.MemStats
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()
	b.SetBytes(size)
	for i := 0; b.Loop(); i++ {
		src := io.LimitReader(rand.NewChaCha8(seedBytes(uint64(i))), size)
		a, err := s.Put(ctx, "sluice/video/bench/big.mp4", "video/mp4", "", src, MaxObjectBytes)
		if err != nil || a.Size != size {
			b.Fatalf("Put = %+v, %v", a, err)
		}
	}
	close(done)
	b.ReportMetric(float64(peak.Load())/mib, "peak-heap-MiB")
	if hwm, ok := peakRSS(); ok {
		b.ReportMetric(float64(hwm)/mib, "peak-RSS-MiB")
	}
	if got := sink.bytes.Load(); got < int64(b.N)*size {
		b.Fatalf("sink received %d bytes, want at least %d", got, int64(b.N)*size)
	}
}

// peakRSS reads the process's peak resident set size (Linux only).
func peakRSS() (uint64, bool) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// sinkS3 answers the S3 calls a Put makes (PutObject, the multipart
// upload calls, CopyObject, DeleteObject) and discards every body.
type sinkS3 struct {
	*httptest.Server
	bytes atomic.Int64
}

func newSinkS3(tb testing.TB) *sinkS3 {
	tb.Helper()
	s := &sinkS3{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		switch {
		case r.Method == http.MethodPost && q.Has("uploads"):
			fmt.Fprint(w, `<InitiateMultipartUploadResult><Bucket>sink</Bucket><Key>k</Key><UploadId>u1</UploadId></InitiateMultipartUploadResult>`)
		case r.Method == http.MethodPut && q.Has("partNumber"):
			s.bytes.Add(n)
			w.Header().Set("ETag", `"part`+q.Get("partNumber")+`"`)
		case r.Method == http.MethodPost && q.Has("uploadId"):
			fmt.Fprint(w, `<CompleteMultipartUploadResult><Bucket>sink</Bucket><Key>k</Key><ETag>"done"</ETag></CompleteMultipartUploadResult>`)
		case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
			fmt.Fprint(w, `<CopyObjectResult><ETag>"copy"</ETag><LastModified>2026-01-01T00:00:00.000Z</LastModified></CopyObjectResult>`)
		case r.Method == http.MethodPut:
			s.bytes.Add(n)
			w.Header().Set("ETag", `"put"`)
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "not supported by the sink", http.StatusNotImplemented)
		}
	}))
	tb.Cleanup(s.Close)
	return s
}
