package apiclient_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

func TestComputeTokenRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("expired token is refreshed once and the call repeated", func(t *testing.T) {
		t.Parallel()
		// center uses the token once, Clusters a second time; Queues
		// meets the expiry.
		b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.TokenMaxUses = 2 }})
		s := b.session(t)
		before := b.currentTokens(t)
		sched, err := s.SchedulerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Queues(ctx, "", sched); err != nil {
			t.Fatalf("Queues after expiry: %v", err)
		}
		if n := b.count("requests:compute.tokens:200"); n != 2 {
			t.Errorf("token calls = %d, want 2 (one refresh)", n)
		}
		if n := b.count("requests:compute.queues:401"); n != 1 {
			t.Errorf("401 answers = %d, want 1", n)
		}
		if after := b.currentTokens(t); after[0] == before[0] {
			t.Error("the token was not replaced")
		}
	})

	t.Run("a token rejected after its refresh fails clearly", func(t *testing.T) {
		t.Parallel()
		var broken atomic.Bool
		b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if broken.Load() && strings.HasPrefix(r.URL.Path, "/hpc/") {
					r.Header.Set("token", "not-a-token")
				}
				h.ServeHTTP(w, r)
			})
		}})
		s := b.session(t)
		broken.Store(true)
		_, err := s.Clusters(ctx)
		if !errors.Is(err, apiclient.ErrUnauthorized) || !strings.Contains(err.Error(), "after one token refresh") {
			t.Fatalf("err = %v, want ErrUnauthorized after one refresh", err)
		}
		if n := b.count("requests:compute.cluster:401"); n != 2 {
			t.Errorf("cluster attempts = %d, want 2 (one repeat)", n)
		}
		if n := b.count("requests:compute.tokens:200"); n != 2 {
			t.Errorf("token calls = %d, want 2 (one refresh)", n)
		}
		computeNoSecret(t, err, b.currentTokens(t)...)
	})

	t.Run("expiry reported in an error envelope", func(t *testing.T) {
		t.Parallel()
		// A platform that answers HTTP 200 with an error code for an
		// expired token: the simulator's 401 is rewritten to 200.
		b := setupCompute(t, computeOpts{
			sim:  func(c *apisim.ComputeConfig) { c.TokenMaxUses = 2 },
			wrap: func(h http.Handler) http.Handler { return computeAuthAs200(h) },
		})
		s := b.session(t)
		sched, err := s.SchedulerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Queues(ctx, "", sched); err != nil {
			t.Fatalf("Queues after in-envelope expiry: %v", err)
		}
		if n := b.count("requests:compute.tokens:200"); n != 2 {
			t.Errorf("token calls = %d, want 2", n)
		}
	})

	t.Run("an error envelope with a still valid token is not repeated", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t) // the token worked for center
		_, err := s.Queues(ctx, "mallory", "2001")
		env, ok := errors.AsType[*apiclient.EnvelopeError](err)
		if !ok || env.Code != apisim.ComputeCodeInvalid {
			t.Fatalf("err = %v, want the envelope error", err)
		}
		if n := b.count("requests:compute.queues:200"); n != 1 {
			t.Errorf("queue calls = %d, want 1: the refreshed token was the same", n)
		}
	})

	t.Run("a token confirmed by a refresh is not refreshed again for a minute", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		// The first error envelope refreshes and gets the same token back;
		// the next ones within a minute are the calls' own errors.
		for range 3 {
			if _, err := s.Queues(ctx, "mallory", "2001"); err == nil {
				t.Fatal("Queues of another user succeeded")
			}
		}
		if n := b.count("requests:compute.tokens:200"); n != 2 {
			t.Errorf("token calls = %d, want 2 (one refresh)", n)
		}
		b.clock.Advance(time.Minute)
		if _, err := s.Queues(ctx, "mallory", "2001"); err == nil {
			t.Fatal("Queues of another user succeeded")
		}
		if n := b.count("requests:compute.tokens:200"); n != 3 {
			t.Errorf("token calls after a minute = %d, want 3 (the envelope may mean expiry again)", n)
		}
	})

	t.Run("an error envelope on a token that never worked does not refresh", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/center") {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"code":"30001","msg":"center unavailable for this org","data":null}`)
					return
				}
				h.ServeHTTP(w, r)
			})
		}})
		_, err := b.client.Cluster(ctx, "")
		env, ok := errors.AsType[*apiclient.EnvelopeError](err)
		if !ok || env.Code != "30001" || env.Op != "center" {
			t.Fatalf("err = %v, want the center's envelope error", err)
		}
		if n := b.count("requests:compute.tokens:200"); n != 1 {
			t.Errorf("token calls = %d, want 1 (no refresh)", n)
		}
	})
}

// computeAuthAs200 rewrites 401 answers to 200, keeping the envelope.
func computeAuthAs200(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		status := rec.Code
		if status == http.StatusUnauthorized && !strings.HasSuffix(r.URL.Path, "/tokens") {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		_, _ = io.Copy(w, bytes.NewReader(rec.Body.Bytes()))
	})
}
