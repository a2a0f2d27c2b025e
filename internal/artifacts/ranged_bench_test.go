package artifacts

import (
	"context"
	"io"
	"testing"

	"github.com/sluice-dev/sluice/internal/mediaprobe"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

// BenchmarkPreflightProbe compares the preflight probe of a 50 MiB MP4
// whose moov sits at its end, over HTTP on loopback, with a full download
// of the same file: bytes read and time per probe (BENCHMARKS.md).
func BenchmarkPreflightProbe(b *testing.B) {
	fix := testmedia.Fixture(b, "video-moov-at-end.mp4")
	movie := testmedia.LargeMovie(b, fix, 50<<20)
	files := testmedia.Serve(b)
	files.Add("big.mp4", func() io.ReadSeeker { return movie.Reader() })
	url := files.URL + "/media/big.mp4"
	f := NewFetcher(FetcherConfig{AllowPrivate: true})
	ctx := context.Background()

	b.Run("probe", func(b *testing.B) {
		var fetched, requests int64
		for b.Loop() {
			r, err := f.OpenRange(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := mediaprobe.Inspect(r, r.Size(), mediaprobe.KindVideo); err != nil {
				b.Fatal(err)
			}
			fetched += r.BytesFetched()
			requests += r.Requests()
		}
		b.ReportMetric(float64(fetched)/float64(b.N), "bytes-read/op")
		b.ReportMetric(float64(requests)/float64(b.N), "requests/op")
	})
	b.Run("full-download", func(b *testing.B) {
		var read int64
		for b.Loop() {
			body, _, err := f.Open(ctx, url)
			if err != nil {
				b.Fatal(err)
			}
			n, err := io.Copy(io.Discard, body)
			body.Close()
			if err != nil {
				b.Fatal(err)
			}
			read += n
		}
		b.ReportMetric(float64(read)/float64(b.N), "bytes-read/op")
	})
}
