package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/s3dev"
	"github.com/sluice-dev/sluice/internal/testenv"
)

const (
	mib = 1 << 20
	// testPartSize is S3's minimum part, so that modest streams already
	// take the multipart path.
	testPartSize = 5 * mib
)

// stream returns n deterministic pseudo-random bytes for seed, and their
// SHA-256.
func stream(seed uint64, n int64) (io.Reader, string) {
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(rand.NewChaCha8(seedBytes(seed)), n)); err != nil {
		panic(err)
	}
	return io.LimitReader(rand.NewChaCha8(seedBytes(seed)), n), hex.EncodeToString(h.Sum(nil))
}

func seedBytes(seed uint64) [32]byte {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return s
}

type storeBundle struct {
	env    *testenv.S3Env
	store  *Store
	sleeps *testenv.Sleeper
}

func setupStore(t testing.TB, mutate ...func(*StoreConfig)) *storeBundle {
	t.Helper()
	env := testenv.StartS3(t)
	rec := &testenv.Sleeper{}
	cfg := StoreConfig{
		Client:      env.Client,
		Bucket:      env.Bucket,
		Prefix:      "sluice",
		PartSize:    testPartSize,
		Concurrency: 3,
		Sleep:       rec.Sleep,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := NewStore(cfg)
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	return &storeBundle{env: env, store: s, sleeps: rec}
}

// checkObject asserts the stored object through HeadObject and a full
// GetObject, and that no staging object is left.
func (b *storeBundle) checkObject(t *testing.T, a Artifact, size int64, sum, contentType string) {
	t.Helper()
	ctx := context.Background()
	if a.Size != size || a.SHA256 != sum || a.ContentType != contentType ||
		a.Bucket != b.env.Bucket || a.URL != "s3://"+b.env.Bucket+"/"+a.Key {
		t.Fatalf("artifact = %+v; want size %d sha256 %s content type %s", a, size, sum, contentType)
	}
	head, err := b.env.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(a.Key)})
	if err != nil {
		t.Fatalf("HeadObject: %v", err)
	}
	if aws.ToInt64(head.ContentLength) != size || aws.ToString(head.ContentType) != contentType || head.Metadata[MetadataSHA256] != sum {
		t.Fatalf("HeadObject = length %d type %q metadata %v; want %d %q sha256=%s",
			aws.ToInt64(head.ContentLength), aws.ToString(head.ContentType), head.Metadata, size, contentType, sum)
	}
	out, err := b.env.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(a.Key)})
	if err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	defer out.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, out.Body)
	if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != sum {
		t.Fatalf("GetObject body: %d bytes, %v, sha256 %x; want %d bytes sha256 %s", n, err, h.Sum(nil), size, sum)
	}
	b.checkNoStaging(t)
}

// checkNoStaging asserts that no staging object and no multipart upload
// is left.
func (b *storeBundle) checkNoStaging(t *testing.T) {
	t.Helper()
	list, err := b.env.Client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
		Bucket: aws.String(b.env.Bucket),
		Prefix: aws.String(b.store.prefix + "/" + stagingDir + "/"),
	})
	if err != nil {
		t.Fatalf("ListObjectsV2: %v", err)
	}
	if len(list.Contents) != 0 {
		t.Fatalf("%d staging objects left, first %s", len(list.Contents), aws.ToString(list.Contents[0].Key))
	}
	uploads, err := b.env.Client.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{
		Bucket: aws.String(b.env.Bucket),
	})
	if httpStatus(err) == http.StatusNotFound {
		return // the dev store's answer for a bucket that never had an upload
	}
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(uploads.Uploads) != 0 {
		t.Fatalf("%d multipart uploads left open, first for %s", len(uploads.Uploads), aws.ToString(uploads.Uploads[0].Key))
	}
}

func TestPut(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name string
		size int64
	}{
		{"Empty", 0},
		{"Small", 1000},
		{"ExactlySmallSize", mib},
		{"OneByteOverSmallSize", mib + 1},
		{"OneByteUnderPart", testPartSize - 1},
		{"ExactlyOnePart", testPartSize},
		{"OneByteOverPart", testPartSize + 1},
		{"MultipartStream40MiB", 40 * mib},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupStore(t)
			key, err := b.store.Key("spring/clips", "video", "clip-"+strconv.Itoa(i), "https://cdn.test/out/abc.mp4")
			if err != nil {
				t.Fatalf("Key: %v", err)
			}
			r, sum := stream(uint64(i), tt.size)
			a, err := b.store.Put(ctx, key, "video/mp4", "https://cdn.test/out/abc.mp4?X-Amz-Signature="+secret, r, 64*mib)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if a.Source != "https://cdn.test/out/abc.mp4" {
				t.Fatalf("Source = %q, want the scrubbed URL", a.Source)
			}
			b.checkObject(t, a, tt.size, sum, "video/mp4")
			// The object is a plain file in the dev store.
			fi, err := os.Stat(b.env.Server.ObjectPath(b.env.Bucket, key))
			if err != nil || fi.Size() != tt.size {
				t.Fatalf("file on disk: %v, %v", fi, err)
			}
		})
	}
}

func TestPutContentTypeFromKey(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	key, _ := b.store.Key("", "compute", "j1", "job.out")
	r, sum := stream(1, 100)
	a, err := b.store.Put(context.Background(), key, "", "/home/user/job.out", r, mib)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	b.checkObject(t, a, 100, sum, "text/plain")
	if a.Source != "/home/user/job.out" {
		t.Fatalf("Source = %q", a.Source)
	}
}

func TestPutOverwrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStore(t)
	key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
	for i, size := range []int64{7 * mib, 1000, 6 * mib} {
		r, sum := stream(uint64(100+i), size)
		a, err := b.store.Put(ctx, key, "video/mp4", "", r, 64*mib)
		if err != nil {
			t.Fatalf("Put %d: %v", i, err)
		}
		b.checkObject(t, a, size, sum, "video/mp4")
	}
}

func TestPutMaxBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name     string
		size     int64
		maxBytes int64
	}{
		{"SmallOverLimit", 51, 50},
		{"MidStreamInMultipart", 12 * mib, 11 * mib},
		{"FirstPartOverLimit", 3 * mib, mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupStore(t)
			key, _ := b.store.Key("", "video", "j1", "big.mp4")
			r, _ := stream(7, tt.size)
			_, err := b.store.Put(ctx, key, "video/mp4", "", r, tt.maxBytes)
			if !errors.Is(err, ErrTooLarge) || IsTemporary(err) {
				t.Fatalf("Put = %v, want permanent ErrTooLarge", err)
			}
			if _, _, err := b.store.Stat(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Stat after refused Put = %v, want ErrNotFound", err)
			}
			b.checkNoStaging(t)
		})
	}
	t.Run("AtLimit", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		key, _ := b.store.Key("", "video", "j1", "big.mp4")
		r, sum := stream(8, 6*mib)
		a, err := b.store.Put(ctx, key, "video/mp4", "", r, 6*mib)
		if err != nil {
			t.Fatalf("Put at limit: %v", err)
		}
		b.checkObject(t, a, 6*mib, sum, "video/mp4")
	})
}

func TestPutRefusesBadArguments(t *testing.T) {
	t.Parallel()
	b := setupStore(t)
	tests := []struct {
		name, key string
		maxBytes  int64
		field     string
	}{
		{"OutsidePrefix", "other/video/j1/f", mib, "key"},
		{"PrefixOnly", "sluice", mib, "key"},
		{"Traversal", "sluice/../x", mib, "key"},
		{"EmptySegment", "sluice//x", mib, "key"},
		{"StagingKey", "sluice/" + stagingDir + "/abc", mib, "key"},
		{"ZeroMax", "sluice/video/j1/f", 0, "maxBytes"},
		{"MaxOverFiveGiB", "sluice/video/j1/f", MaxObjectBytes + 1, "maxBytes"},
	}
	for _, tt := range tests {
		_, err := b.store.Put(context.Background(), tt.key, "", "", strings.NewReader("x"), tt.maxBytes)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.field+":") {
			t.Errorf("%s: Put = %v, want ErrInvalidArgument naming %s", tt.name, err, tt.field)
		}
	}
}

// flakySource serves /file: the first failures requests answer status (or
// break the body when status is 0), the rest the full body.
type flakySource struct {
	*httptest.Server
	hits atomic.Int64
}

func newFlakySource(t *testing.T, failures int64, status int, contentType string, body []byte) *flakySource {
	t.Helper()
	fs := &flakySource{}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := fs.hits.Add(1)
		if n <= failures {
			if status != 0 {
				http.Error(w, "try later", status)
				return
			}
			// Promise the whole body, send half, and hang up.
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body[:len(body)/2])
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	t.Cleanup(fs.Close)
	return fs
}

func TestCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	body, _ := io.ReadAll(func() io.Reader { r, _ := stream(42, 7*mib); return r }())
	sum := sha256.Sum256(body)
	wantSum := hex.EncodeToString(sum[:])
	fetcher := NewFetcher(FetcherConfig{AllowPrivate: true})

	t.Run("RetriesTwo503sThenSucceeds", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		src := newFlakySource(t, 2, http.StatusServiceUnavailable, "video/mp4", body)
		key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
		a, err := b.store.Copy(ctx, key, 64*mib, fetcher.Opener(src.URL+"/file?X-Amz-Signature="+secret))
		if err != nil {
			t.Fatalf("Copy: %v", err)
		}
		b.checkObject(t, a, int64(len(body)), wantSum, "video/mp4")
		if got := src.hits.Load(); got != 3 {
			t.Fatalf("source opened %d times, want 3", got)
		}
		if got := b.sleeps.Waits(); len(got) != 2 || got[0] != time.Second || got[1] != 2*time.Second {
			t.Fatalf("backoff delays = %v, want [1s 2s]", got)
		}
		if a.Source != src.URL+"/file" {
			t.Fatalf("Source = %q, want the scrubbed URL", a.Source)
		}
	})

	t.Run("RetriesABrokenBody", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		src := newFlakySource(t, 1, 0, "application/octet-stream", body)
		key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
		a, err := b.store.Copy(ctx, key, 64*mib, fetcher.Opener(src.URL+"/file"))
		if err != nil {
			t.Fatalf("Copy: %v", err)
		}
		// octet-stream is not a real type: the extension decides.
		b.checkObject(t, a, int64(len(body)), wantSum, "video/mp4")
		if got := src.hits.Load(); got != 2 {
			t.Fatalf("source opened %d times, want 2", got)
		}
	})

	t.Run("GivesUpOn404WithoutRetry", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		src := newFlakySource(t, 100, http.StatusNotFound, "", body)
		key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
		_, err := b.store.Copy(ctx, key, 64*mib, fetcher.Opener(src.URL+"/file?sig="+secret))
		checkSafe(t, err)
		fe, ok := errors.AsType[*FetchError](err)
		if !ok || fe.Status != http.StatusNotFound {
			t.Fatalf("Copy = %v, want a 404 *FetchError", err)
		}
		if got := src.hits.Load(); got != 1 {
			t.Fatalf("source opened %d times, want 1", got)
		}
		// A permanent error was never going to be retried: no "attempt 1
		// of 4", which reads as if three more were coming.
		if strings.Contains(err.Error(), "attempt 1 of") || !strings.Contains(err.Error(), "not retried") {
			t.Errorf("Copy = %v, want it said not retried, without an attempt count", err)
		}
		if got := b.sleeps.Waits(); len(got) != 0 {
			t.Fatalf("slept %v before giving up, want no sleep", got)
		}
		if _, _, err := b.store.Stat(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Stat = %v, want ErrNotFound", err)
		}
	})

	t.Run("StopsAfterMaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t, func(c *StoreConfig) { c.MaxAttempts = 3 })
		src := newFlakySource(t, 100, http.StatusBadGateway, "", body)
		key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
		_, err := b.store.Copy(ctx, key, 64*mib, fetcher.Opener(src.URL+"/file"))
		if !IsTemporary(err) || !strings.Contains(err.Error(), "attempt 3 of 3") {
			t.Fatalf("Copy = %v, want a temporary error after 3 attempts", err)
		}
		if got := src.hits.Load(); got != 3 {
			t.Fatalf("source opened %d times, want 3", got)
		}
		if got := len(b.sleeps.Waits()); got != 2 {
			t.Fatalf("slept %d times, want 2", got)
		}
	})

	t.Run("TooLargeIsNotRetried", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		src := newFlakySource(t, 0, 0, "video/mp4", body)
		key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
		small := NewFetcher(FetcherConfig{AllowPrivate: true, MaxBytes: mib})
		for _, tc := range []struct {
			name     string
			open     OpenFunc
			maxBytes int64
		}{
			{"ByContentLength", small.Opener(src.URL + "/file"), 64 * mib},
			{"ByCopyLimit", fetcher.Opener(src.URL + "/file"), 6 * mib},
		} {
			before := src.hits.Load()
			_, err := b.store.Copy(ctx, key, tc.maxBytes, tc.open)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%s: Copy = %v, want ErrTooLarge", tc.name, err)
			}
			if got := src.hits.Load() - before; got != 1 {
				t.Fatalf("%s: source opened %d times, want 1", tc.name, got)
			}
		}
		if got := b.sleeps.Waits(); len(got) != 0 {
			t.Fatalf("slept %v, want no sleep", got)
		}
		b.checkNoStaging(t)
	})

	t.Run("PrivateSourceIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		src := newFlakySource(t, 0, 0, "video/mp4", body)
		key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
		_, err := b.store.Copy(ctx, key, 64*mib, NewFetcher(FetcherConfig{}).Opener(src.URL+"/file"))
		if !errors.Is(err, ErrPrivateAddress) || src.hits.Load() != 0 || len(b.sleeps.Waits()) != 0 {
			t.Fatalf("Copy = %v after %d hits, want ErrPrivateAddress and no request", err, src.hits.Load())
		}
	})

	t.Run("CancelledWhileWaiting", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(ctx)
		b := setupStore(t, func(c *StoreConfig) {
			c.Sleep = func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
		})
		src := newFlakySource(t, 100, http.StatusServiceUnavailable, "", body)
		key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
		_, err := b.store.Copy(ctx, key, 64*mib, fetcher.Opener(src.URL+"/file"))
		if !errors.Is(err, context.Canceled) || src.hits.Load() != 1 {
			t.Fatalf("Copy = %v after %d hits, want context.Canceled after 1", err, src.hits.Load())
		}
	})

	t.Run("S3SourceThroughOpen", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		srcKey, _ := b.store.Key("", "compute", "j0", "input.bin")
		if _, err := b.store.Put(ctx, srcKey, "", "", bytes.NewReader(body), 64*mib); err != nil {
			t.Fatalf("Put: %v", err)
		}
		key, _ := b.store.Key("", "compute", "j1", "copy.bin")
		a, err := b.store.Copy(ctx, key, 64*mib, func(ctx context.Context) (io.ReadCloser, string, string, error) {
			rc, err := b.store.Open(ctx, b.store.Bucket(), srcKey)
			return rc, "", "s3://" + b.store.Bucket() + "/" + srcKey, err
		})
		if err != nil {
			t.Fatalf("Copy: %v", err)
		}
		b.checkObject(t, a, int64(len(body)), wantSum, "application/octet-stream")
	})

	t.Run("TransientOpenErrorIsRetried", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		var calls int
		key, _ := b.store.Key("", "compute", "j1", "out.log")
		a, err := b.store.Copy(ctx, key, mib, func(context.Context) (io.ReadCloser, string, string, error) {
			calls++
			if calls == 1 {
				return nil, "", "", Transient(errors.New("compute platform busy"))
			}
			return io.NopCloser(strings.NewReader("log line\n")), "", "/home/u/out.log", nil
		})
		if err != nil || calls != 2 || a.ContentType != "text/plain" || a.Size != 9 {
			t.Fatalf("Copy = %+v, %v after %d calls", a, err, calls)
		}
	})
}

func TestPresignRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStore(t)
	key, _ := b.store.Key("", "video", "in", "boat.png")
	want := []byte("\x89PNG not really")
	if _, err := b.store.Put(ctx, key, "image/png", "", bytes.NewReader(want), mib); err != nil {
		t.Fatalf("Put: %v", err)
	}
	u, err := b.store.Presign(ctx, b.env.Bucket, key, 0)
	if err != nil {
		t.Fatalf("Presign: %v", err)
	}
	if !strings.Contains(u, "X-Amz-Signature=") || !strings.Contains(u, "X-Amz-Expires=3600") {
		t.Fatalf("presigned URL %s lacks a signature or the 1 h default", redact.URL(u))
	}
	if strings.Contains(redact.URL(u), "X-Amz") {
		t.Fatalf("redact.URL kept the query: %s", redact.URL(u))
	}
	got, ct, err := fetchAll(ctx, NewFetcher(FetcherConfig{AllowPrivate: true}), u)
	if err != nil || got != string(want) || ct != "image/png" {
		t.Fatalf("fetch presigned = %q, %q, %v", got, ct, err)
	}
	for _, ttl := range []time.Duration{-time.Second, 8 * 24 * time.Hour} {
		if _, err := b.store.Presign(ctx, b.env.Bucket, key, ttl); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("Presign ttl %s = %v, want ErrInvalidArgument", ttl, err)
		}
	}
}

func TestOpenAndStat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStore(t)
	key, _ := b.store.Key("", "compute", "j1", "in.txt")
	if _, err := b.store.Put(ctx, key, "", "", strings.NewReader("input"), mib); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rc, err := b.store.Open(ctx, b.env.Bucket, key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	got, err := io.ReadAll(rc)
	_ = rc.Close()
	if err != nil || string(got) != "input" {
		t.Fatalf("Open read %q, %v", got, err)
	}
	size, sum, err := b.store.Stat(ctx, key)
	want := sha256.Sum256([]byte("input"))
	if err != nil || size != 5 || sum != hex.EncodeToString(want[:]) {
		t.Fatalf("Stat = %d, %s, %v", size, sum, err)
	}
	if _, err := b.store.Open(ctx, b.env.Bucket, "sluice/missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Open missing = %v, want ErrNotFound", err)
	}
	if _, _, err := b.store.Stat(ctx, "sluice/missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat missing = %v, want ErrNotFound", err)
	}
}

func TestEnsureBucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.StartS3(t)
	s, err := NewStore(StoreConfig{Client: env.Client, Bucket: "fresh-bucket"})
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	for i := range 2 { // the second call finds the bucket
		if err := s.EnsureBucket(ctx); err != nil {
			t.Fatalf("EnsureBucket %d: %v", i, err)
		}
	}
	if _, err := env.Client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("fresh-bucket")}); err != nil {
		t.Fatalf("bucket not created: %v", err)
	}
}

func TestNewS3Client(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.StartS3(t)
	client, err := NewS3Client(ctx, S3Config{
		Endpoint: env.Endpoint, PathStyle: true,
		AccessKeyID: s3dev.AccessKeyID, SecretAccessKey: s3dev.SecretAccessKey,
	})
	if err != nil {
		t.Fatalf("NewS3Client: %v", err)
	}
	s, err := NewStore(StoreConfig{Client: client, Bucket: env.Bucket})
	if err != nil {
		t.Fatalf("NewStore: %v", err)
	}
	if _, err := s.Put(ctx, "sluice/video/j1/x.mp4", "", "", strings.NewReader("x"), mib); err != nil {
		t.Fatalf("Put through NewS3Client's client: %v", err)
	}

	for _, tc := range []struct {
		cfg   S3Config
		field string
	}{
		{S3Config{Endpoint: "localhost:9000"}, "Endpoint"},
		{S3Config{Endpoint: "ftp://host"}, "Endpoint"},
		{S3Config{Endpoint: "https://k:" + secret + "@host"}, "Endpoint"},
		{S3Config{AccessKeyID: "only-id"}, "AccessKeyID"},
	} {
		_, err := NewS3Client(ctx, tc.cfg)
		checkSafe(t, err)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("NewS3Client(%s) = %v, want ErrInvalidArgument naming %s", redact.URL(tc.cfg.Endpoint), err, tc.field)
		}
	}
}

func TestNewStoreValidation(t *testing.T) {
	t.Parallel()
	client := s3.New(s3.Options{Region: "us-east-1"})
	tests := []struct {
		name  string
		cfg   StoreConfig
		field string
	}{
		{"NoClient", StoreConfig{Bucket: "b"}, "Client"},
		{"NoBucket", StoreConfig{Client: client}, "Bucket"},
		{"SlashInBucket", StoreConfig{Client: client, Bucket: "a/b"}, "Bucket"},
		{"PrefixTraversal", StoreConfig{Client: client, Bucket: "b", Prefix: "a/../b"}, "Prefix"},
		{"PrefixLeadingSlash", StoreConfig{Client: client, Bucket: "b", Prefix: "/a"}, "Prefix"},
		{"PrefixOnlySlashes", StoreConfig{Client: client, Bucket: "b", Prefix: "//"}, "Prefix"},
		{"SmallPart", StoreConfig{Client: client, Bucket: "b", PartSize: mib}, "PartSize"},
		{"NegativeConcurrency", StoreConfig{Client: client, Bucket: "b", Concurrency: -1}, "Concurrency"},
		{"NegativeAttempts", StoreConfig{Client: client, Bucket: "b", MaxAttempts: -1}, "MaxAttempts"},
		{"NegativeUploads", StoreConfig{Client: client, Bucket: "b", MaxUploads: -1}, "MaxUploads"},
		{"BackoffOrder", StoreConfig{Client: client, Bucket: "b", MinBackoff: time.Minute, MaxBackoff: time.Second}, "MaxBackoff"},
	}
	for _, tt := range tests {
		_, err := NewStore(tt.cfg)
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.field+":") {
			t.Errorf("%s: NewStore = %v, want ErrInvalidArgument naming %s", tt.name, err, tt.field)
		}
	}
	s, err := NewStore(StoreConfig{Client: client, Bucket: "b", Prefix: "data/sluice/"})
	if err != nil || s.prefix != "data/sluice" {
		t.Fatalf("NewStore with trailing slash = %v, prefix %q", err, s.prefix)
	}
}

// failingReader fails every read with err.
type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

func TestPutTruncatedSourceFails(t *testing.T) {
	t.Parallel()
	for _, size := range []int64{1000, 7 * mib} {
		t.Run(strconv.FormatInt(size, 10), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setupStore(t)
			key, _ := b.store.Key("", "video", "j1", "cut.mp4")
			half, _ := stream(3, size)
			r := io.MultiReader(half, failingReader{io.ErrUnexpectedEOF})
			_, err := b.store.Put(ctx, key, "", "", r, 64*mib)
			if !errors.Is(err, io.ErrUnexpectedEOF) || !IsTemporary(err) {
				t.Fatalf("Put of a truncated source = %v, want a temporary io.ErrUnexpectedEOF", err)
			}
			if _, _, err := b.store.Stat(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Stat = %v, want ErrNotFound", err)
			}
			b.checkNoStaging(t)
		})
	}
}

// hookReader calls hook once, when more than at bytes have been read.
type hookReader struct {
	r    io.Reader
	at   int64
	n    int64
	hook func()
}

func (h *hookReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.n += int64(n)
	if h.hook != nil && h.n > h.at {
		h.hook()
		h.hook = nil
	}
	return n, err
}

func TestPutNeverExposesAnObjectWithoutChecksum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStore(t)
	key, _ := b.store.Key("", "video", "j1", "result-0.mp4")
	old, oldSum := stream(20, 1000)
	if _, err := b.store.Put(ctx, key, "video/mp4", "", old, 64*mib); err != nil {
		t.Fatalf("first Put: %v", err)
	}
	// While a large replacement streams, readers still see the old,
	// complete object with its own checksum.
	r, sum := stream(21, 20*mib)
	var midSize int64
	var midSum string
	var midErr error
	hooked := &hookReader{r: r, at: 12 * mib, hook: func() {
		midSize, midSum, midErr = b.store.Stat(ctx, key)
	}}
	a, err := b.store.Put(ctx, key, "video/mp4", "", hooked, 64*mib)
	if err != nil {
		t.Fatalf("second Put: %v", err)
	}
	if midErr != nil || midSize != 1000 || midSum != oldSum {
		t.Fatalf("mid-upload Stat = %d, %s, %v; want the old object (1000, %s)", midSize, midSum, midErr, oldSum)
	}
	b.checkObject(t, a, 20*mib, sum, "video/mp4")
}

// blockingReader yields n bytes, then blocks until release is closed, then
// ends.
type blockingReader struct {
	n       int64
	reached chan struct{}
	once    bool
	release chan struct{}
}

func (r *blockingReader) Read(p []byte) (int, error) {
	if r.n > 0 {
		m := int(min(int64(len(p)), r.n))
		clear(p[:m])
		r.n -= int64(m)
		return m, nil
	}
	if r.reached != nil && !r.once {
		r.once = true
		close(r.reached)
	}
	<-r.release
	return 0, io.EOF
}

// Small objects do not queue behind large uploads: with the only upload
// slot held by a large Put, small ones still complete, and a second large
// one waits.
func TestSmallPutsDoNotWaitForUploadSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupStore(t, func(c *StoreConfig) { c.MaxUploads = 1 })
	large := &blockingReader{n: 2 * mib, reached: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := b.store.Put(ctx, "sluice/video/large-1/result-0.mp4", "", "", large, 64*mib)
		done <- err
	}()
	<-large.reached // the large Put holds the upload slot, reading on
	for i := range 3 {
		r, sum := stream(uint64(100+i), 64<<10)
		a, err := b.store.Put(ctx, "sluice/video/small-"+strconv.Itoa(i)+"/result-0.mp4", "", "", r, 64*mib)
		if err != nil {
			t.Fatalf("small Put %d: %v", i, err)
		}
		b.checkObject(t, a, 64<<10, sum, "video/mp4")
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	second := &blockingReader{n: 2 * mib, release: make(chan struct{})}
	close(second.release)
	if _, err := b.store.Put(wctx, "sluice/video/large-2/result-0.mp4", "", "", second, 64*mib); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second large Put while the slot is held: %v, want it to wait until its context ended", err)
	}
	close(large.release)
	if err := <-done; err != nil {
		t.Fatalf("large Put: %v", err)
	}
}
