package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// A download whose server closes the connection before the first byte,
// with no Content-Length and no chunked framing, reads as an empty file
// to net/http. The copy must not store it as the result: it opens the
// source again and stores what the server serves whole.
func TestCopyRefusesAnEmptyUnframedBody(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("frame"), 2000)
	sum := sha256.Sum256(body)
	var hits atomic.Int64
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			// Headers without a length, then the connection closes: the
			// body ends where the connection does.
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: video/mp4\r\nConnection: close\r\n\r\n")
			_ = buf.Flush()
			_ = conn.Close()
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	t.Cleanup(src.Close)
	b := setupStore(t)
	fetcher := NewFetcher(FetcherConfig{AllowPrivate: true})
	key, _ := b.store.Key("", "video", "j-empty", "result-0.mp4")
	a, err := b.store.Copy(testenv.Context(t, time.Minute), key, 64*mib, fetcher.Opener(src.URL+"/result.mp4"))
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	b.checkObject(t, a, int64(len(body)), hex.EncodeToString(sum[:]), "video/mp4")
	if got := hits.Load(); got != 2 {
		t.Errorf("source opened %d times, want 2 (the empty answer refused once)", got)
	}
}

// An empty body that upstream announced as empty (Content-Length: 0) is
// what upstream served, and is stored as such.
func TestCopyStoresAnAnnouncedEmptyBody(t *testing.T) {
	t.Parallel()
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(src.Close)
	b := setupStore(t)
	fetcher := NewFetcher(FetcherConfig{AllowPrivate: true})
	key, _ := b.store.Key("", "compute", "j-zero", "stderr.txt")
	a, err := b.store.Copy(testenv.Context(t, time.Minute), key, 64*mib, fetcher.Opener(src.URL+"/stderr"))
	if err != nil {
		t.Fatalf("Copy of an announced empty body: %v", err)
	}
	empty := sha256.Sum256(nil)
	b.checkObject(t, a, 0, hex.EncodeToString(empty[:]), "text/plain")
}

// announced is a body that says how long it is (as the bodies of
// Fetcher.Open, Store.Open and the compute download do) and may end
// before that, as a spent or cut reader that reports io.EOF does.
type announced struct {
	io.Reader
	size int64
}

func (a announced) Size() int64 { return a.size }

// Put checks the bytes it read against the length the source announced:
// a reader that ends early with io.EOF (a reader already spent by an
// earlier attempt, a cut taken for the end) fails with ErrShortBody, a
// temporary error, and writes nothing; on the small and the multipart
// path alike.
func TestPutRefusesABodyShorterThanAnnounced(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		got, say int64
	}{
		{"Empty", 0, 1000},
		{"HalfSmall", 500, 1000},
		{"HalfLarge", 6 * mib, 12 * mib},
		{"Longer", 1000, 500},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testenv.Context(t, time.Minute)
			b := setupStore(t)
			key, _ := b.store.Key("", "video", "j-"+tt.name, "result-0.mp4")
			r, _ := stream(9, tt.got)
			_, err := b.store.Put(ctx, key, "", "", announced{r, tt.say}, 64*mib)
			if !errors.Is(err, ErrShortBody) || !IsTemporary(err) {
				t.Fatalf("Put of %d bytes announced as %d = %v, want a temporary ErrShortBody", tt.got, tt.say, err)
			}
			if _, _, err := b.store.Stat(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Stat = %v, want ErrNotFound", err)
			}
			b.checkNoStaging(t)
		})
	}
	t.Run("Exact", func(t *testing.T) {
		t.Parallel()
		b := setupStore(t)
		key, _ := b.store.Key("", "video", "j-exact", "result-0.mp4")
		r, sum := stream(9, 1000)
		a, err := b.store.Put(context.Background(), key, "", "", announced{r, 1000}, 64*mib)
		if err != nil {
			t.Fatalf("Put: %v", err)
		}
		b.checkObject(t, a, 1000, sum, "video/mp4")
	})
}

// A store that refuses the write for a lasting reason (here the bucket is
// gone: NoSuchBucket) fails Put and Copy with ErrStoreRefused at once,
// without Copy's retries, and the refusal is neither temporary nor taken
// for a failure of the source.
func TestStoreRefusalIsTyped(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	b := setupStore(t)
	if _, err := b.env.Client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(b.env.Bucket)}); err != nil {
		t.Fatalf("DeleteBucket: %v", err)
	}
	key, _ := b.store.Key("", "video", "j-refused", "result-0.mp4")
	_, err := b.store.Put(ctx, key, "", "", bytes.NewReader([]byte("frames")), 64*mib)
	if !errors.Is(err, ErrStoreRefused) || !IsStoreRefusal(err) || IsTemporary(err) {
		t.Fatalf("Put into a deleted bucket = %v, want ErrStoreRefused, not temporary", err)
	}
	opens := 0
	_, err = b.store.Copy(ctx, key, 64*mib, func(context.Context) (io.ReadCloser, string, string, error) {
		opens++
		return io.NopCloser(bytes.NewReader([]byte("frames"))), "", "test", nil
	})
	if !errors.Is(err, ErrStoreRefused) || opens != 1 || len(b.sleeps.Waits()) != 0 {
		t.Fatalf("Copy into a deleted bucket = %v after %d opens and waits %v, want ErrStoreRefused at once", err, opens, b.sleeps.Waits())
	}
}
