package artifacts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestCachedResolverIgnoresTheObject holds the SDK to what cachedResolver
// assumes: the endpoint of a request depends on its bucket and the
// client's settings, not on its object key, prefix or copy source. It also
// checks that the cached answers are the SDK's.
func TestCachedResolverIgnoresTheObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sdk := s3.NewDefaultEndpointResolverV2()
	cached := newCachedResolver(sdk)
	for _, p := range []s3.EndpointParameters{
		{Bucket: aws.String("b"), Region: aws.String("us-east-1"), Endpoint: aws.String("http://127.0.0.1:9000"), ForcePathStyle: aws.Bool(true)},
		{Bucket: aws.String("b"), Region: aws.String("eu-west-1"), Endpoint: aws.String("https://s3.example.test"), ForcePathStyle: aws.Bool(false)},
		{Bucket: aws.String("artifacts"), Region: aws.String("eu-west-1")},
		{Bucket: aws.String("with.dots"), Region: aws.String("us-west-2"), UseFIPS: aws.Bool(true)},
		{Bucket: aws.String("artifacts"), Region: aws.String("us-east-1"), UseDualStack: aws.Bool(true)},
	} {
		var first any
		for i, obj := range []struct{ key, prefix, src string }{
			{"", "", ""},
			{"sluice/video/j1/result-0.mp4", "", ""},
			{"other/key with spaces", "sluice/", "b/sluice/.staging/x"},
		} {
			q := p
			if obj.key != "" {
				q.Key = aws.String(obj.key)
			}
			if obj.prefix != "" {
				q.Prefix = aws.String(obj.prefix)
			}
			if obj.src != "" {
				q.CopySource = aws.String(obj.src)
			}
			want, err := sdk.ResolveEndpoint(ctx, q)
			if err != nil {
				t.Fatalf("SDK resolver(%+v): %v", q, err)
			}
			got, err := cached.ResolveEndpoint(ctx, q)
			if err != nil {
				t.Fatalf("cached resolver: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("cached %+v, SDK %+v", got, want)
			}
			if i == 0 {
				first = want
			} else if !reflect.DeepEqual(want, first) {
				t.Errorf("the SDK's endpoint depends on the object (%+v): %+v against %+v; cachedResolver must not leave it out", obj, want, first)
			}
		}
	}
	if n := len(cached.seen); n != 5 {
		t.Errorf("cached %d endpoints, want 5 (one per bucket and setting)", n)
	}
}

// TestSmallPutSignsItsSum checks that a small Put hands the SDK the
// SHA-256 it computed for the object's metadata, which the SDK signs as the
// payload's hash (x-amz-content-sha256) instead of hashing the body again,
// and that the hash is the body's.
func TestSmallPutSignsItsSum(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var signed, meta, body string
	s := answeringStore(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h := sha256.Sum256(b)
		mu.Lock()
		signed, meta, body = r.Header.Get("X-Amz-Content-Sha256"), r.Header.Get("X-Amz-Meta-Sha256"), hex.EncodeToString(h[:])
		mu.Unlock()
	}))
	a, err := s.Put(context.Background(), "sluice/video/j1/result-0.mp4", "", "", strings.NewReader(strings.Repeat("frame", 1000)), mib)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	mu.Lock()
	if signed != a.SHA256 || meta != a.SHA256 || body != a.SHA256 {
		t.Errorf("x-amz-content-sha256 %q, metadata sha256 %q, body's sha256 %q, artifact's %q: want all the same", signed, meta, body, a.SHA256)
	}
	mu.Unlock()

	// The signed hash is the one given, not one the SDK computed (a store
	// that checks it refuses this PUT; this one does not check).
	given := strings.Repeat("ab", 32)
	if err := s.putSmall(context.Background(), "sluice/video/j1/result-1.mp4", "video/mp4", []byte("x"), given); err != nil {
		t.Fatalf("putSmall: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if signed != given {
		t.Fatalf("x-amz-content-sha256 %q, want the given %q", signed, given)
	}
}

// TestConcurrentPutsShareTheEndpoint runs many small Puts at once through
// one client: the SDK rewrites the auth options of the endpoint it is
// given, so each request must get its own copy of the remembered one (the
// race detector, and the runtime's map checks, catch a shared one).
func TestConcurrentPutsShareTheEndpoint(t *testing.T) {
	t.Parallel()
	s := answeringStore(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	var wg sync.WaitGroup
	errs := make(chan error, 32*8)
	for g := range 32 {
		wg.Go(func() {
			for i := range 8 {
				key := "sluice/video/j" + strconv.Itoa(g) + "/result-" + strconv.Itoa(i) + ".mp4"
				if _, err := s.Put(context.Background(), key, "", "", strings.NewReader("frame"), mib); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Put: %v", err)
	}
}

// answeringStore is a Store on a client from NewS3Client whose S3 is an
// HTTP server that runs see on each request and answers 200 with an ETag.
func answeringStore(t *testing.T, see http.HandlerFunc) *Store {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		see(w, r)
		w.Header().Set("ETag", `"x"`)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	client, err := NewS3Client(context.Background(), S3Config{Endpoint: srv.URL, PathStyle: true, AccessKeyID: "k", SecretAccessKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(StoreConfig{Client: client, Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
