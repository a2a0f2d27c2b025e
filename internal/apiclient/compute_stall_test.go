package apiclient_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// stallBound is how long a test waits for a stalled transfer to fail
// before it reports the transfer blocked: far above the client's
// AttemptTimeout, so only a missing stall check can reach it.
const stallBound = 30 * time.Second

// stallingEfile answers a download with its headers and a first part of
// the body, then sends nothing more; it reads an upload's first MiB, then
// reads nothing more. Both hold the request until the client goes away
// or release is closed.
func stallingEfile(release <-chan struct{}) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler { return stallEfile(h, release) }
}

func stallEfile(h http.Handler, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/file/download"):
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", "1048576")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(make([]byte, 1024))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case strings.HasSuffix(r.URL.Path, "/file/upload"), strings.HasSuffix(r.URL.Path, "/file/burst"):
			_, _ = io.CopyN(io.Discard, r.Body, 1<<20)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// zeros is an endless source of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// finishes runs f with a context and fails the test when f is still
// blocked after stallBound; the context is then cancelled so that f (and
// the test server) can end.
func finishes(t *testing.T, what string, f func(context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(stallBound):
		cancel()
		<-done
		t.Fatalf("%s still blocked after %s: a stalled transfer is never noticed", what, stallBound)
		return nil
	}
}

// A transfer that stops moving fails once no byte moved for
// AttemptTimeout, whatever context the caller passed: a stalled download
// or upload must not hold a compute call slot for ever.
func TestComputeStalledTransfersFail(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setupCompute(t, computeOpts{
		client: func(c *apiclient.ComputeConfig) { c.AttemptTimeout, c.MaxAttempts = 300*time.Millisecond, 1 },
		wrap:   stallingEfile(release),
	})
	t.Cleanup(func() { close(release) }) // before the server closes
	s := b.session(t)

	t.Run("download", func(t *testing.T) {
		err := finishes(t, "reading a stalled download", func(ctx context.Context) error {
			body, err := s.Download(ctx, "/public/home/alice/big.dat")
			if err != nil {
				t.Errorf("Download: %v", err)
				return nil
			}
			defer func() { _ = body.Close() }()
			_, err = io.Copy(io.Discard, body)
			return err
		})
		if err == nil || !apiclient.IsTransient(err) || !strings.Contains(err.Error(), "stalled") {
			t.Errorf("read error = %v, want a transient error naming the stall", err)
		}
	})

	t.Run("upload", func(t *testing.T) {
		err := finishes(t, "a stalled upload", func(ctx context.Context) error {
			return s.Upload(ctx, "/public/home/alice", "big.dat", true, func() (io.ReadCloser, error) {
				return io.NopCloser(io.LimitReader(zeros{}, 256<<20)), nil
			})
		})
		if err == nil || !strings.Contains(err.Error(), "stalled") {
			t.Errorf("Upload error = %v, want one naming the stall", err)
		}
		if errors.Is(err, apiclient.ErrInvalidArgument) {
			t.Errorf("Upload error = %v", err)
		}
	})
}
