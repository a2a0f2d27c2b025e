package artifacts

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/mediaprobe"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

// serveObject serves b at /clip.mp4, honouring Range unless noRanges.
func serveObject(t testing.TB, open func() io.ReadSeeker, noRanges bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/clip.mp4" {
			http.NotFound(w, r)
			return
		}
		if noRanges {
			r.Header.Del("Range")
		}
		http.ServeContent(w, r, "clip.mp4", time.Time{}, open())
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOpenRangeProbe(t *testing.T) {
	t.Parallel()
	fix := testmedia.Fixture(t, "video-moov-at-end.mp4")
	big := testmedia.LargeMovie(t, fix, 50<<20)
	for _, noRanges := range []bool{false, true} {
		name := map[bool]string{false: "ranges", true: "server ignores Range"}[noRanges]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := serveObject(t, func() io.ReadSeeker { return big.Reader() }, noRanges)
			f := NewFetcher(FetcherConfig{AllowPrivate: true})
			r, err := f.OpenRange(context.Background(), srv.URL+"/clip.mp4?X-Amz-Signature=topsecret")
			if err != nil {
				t.Fatalf("OpenRange: %v", err)
			}
			if r.Size() != 50<<20 {
				t.Fatalf("Size = %d", r.Size())
			}
			info, err := mediaprobe.Probe(r, r.Size())
			if err != nil {
				t.Fatalf("Probe: %v", err)
			}
			if info.Width != 256 || info.Height != 256 || info.VideoCodec != "H.264" || info.Duration != 3*time.Second {
				t.Errorf("Probe = %+v", info)
			}
			if le := mediaprobe.Check(mediaprobe.KindVideo, info); le != nil {
				t.Errorf("Check = %v", le)
			}
			if !noRanges && r.BytesFetched() > 256<<10 {
				t.Errorf("fetched %d bytes of 50 MiB in %d requests, want at most 256 KiB", r.BytesFetched(), r.Requests())
			}
		})
	}
}

func TestOpenRangeErrors(t *testing.T) {
	t.Parallel()
	srv := serveObject(t, func() io.ReadSeeker { return strings.NewReader("tiny") }, false)
	allow := NewFetcher(FetcherConfig{AllowPrivate: true})
	ctx := context.Background()

	_, err := allow.OpenRange(ctx, srv.URL+"/missing.mp4?sig=topsecret")
	var fe *FetchError
	if !errors.As(err, &fe) || fe.Status != http.StatusNotFound || fe.Temporary() {
		t.Errorf("missing object: %v, want a permanent 404 *FetchError", err)
	}
	if err != nil && strings.Contains(err.Error(), "topsecret") {
		t.Errorf("error carries the query: %v", err)
	}

	guarded := NewFetcher(FetcherConfig{})
	if _, err := guarded.OpenRange(ctx, srv.URL+"/clip.mp4"); !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("loopback without AllowPrivate: %v, want ErrPrivateAddress", err)
	}
	if _, err := allow.OpenRange(ctx, "ftp://example.test/clip.mp4"); !errors.Is(err, ErrUnsupportedScheme) {
		t.Errorf("ftp: %v, want ErrUnsupportedScheme", err)
	}
	small := NewFetcher(FetcherConfig{AllowPrivate: true, MaxBytes: 3})
	if _, err := small.OpenRange(ctx, srv.URL+"/clip.mp4"); !errors.Is(err, ErrTooLarge) {
		t.Errorf("4 bytes over a 3-byte limit: %v, want ErrTooLarge", err)
	}
	r, err := allow.OpenRange(ctx, srv.URL+"/clip.mp4")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 8)
	if n, err := r.ReadAt(p, 0); n != 4 || err != io.EOF || string(p[:4]) != "tiny" {
		t.Errorf("ReadAt = %d, %v, %q", n, err, p[:n])
	}
}

func TestStoreOpenRange(t *testing.T) {
	t.Parallel()
	env := testenv.StartS3(t)
	fix := testmedia.Fixture(t, "video-moov-at-end.mp4")
	big := testmedia.LargeMovie(t, fix, 8<<20)
	ctx := context.Background()
	if _, err := env.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(env.Bucket), Key: aws.String("in/clip.mp4"), Body: big.Reader()}); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(StoreConfig{Client: env.Client, Bucket: env.Bucket})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenRange(ctx, env.Bucket, "in/clip.mp4")
	if err != nil {
		t.Fatalf("OpenRange: %v", err)
	}
	info, err := mediaprobe.Probe(r, r.Size())
	if err != nil || info.VideoCodec != "H.264" || info.Size != 8<<20 {
		t.Fatalf("Probe = %+v, %v", info, err)
	}
	if r.BytesFetched() > 256<<10 {
		t.Errorf("fetched %d bytes of 8 MiB", r.BytesFetched())
	}
	if _, err := s.OpenRange(ctx, env.Bucket, "in/missing.mp4"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing object: %v, want ErrNotFound", err)
	}
}
