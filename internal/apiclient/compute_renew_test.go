package apiclient_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// tokenEvents counts what ComputeConfig.OnToken reports.
type tokenEvents struct {
	mu sync.Mutex
	n  map[string]int
}

func (e *tokenEvents) add(how string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[string]int{}
	}
	e.n[how]++
}

func (e *tokenEvents) get(how string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[how]
}

func TestComputeTokenRenewal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const life = time.Hour
	setup := func(t *testing.T, wrap func(http.Handler) http.Handler) (*computeBundle, *tokenEvents) {
		t.Helper()
		ev := &tokenEvents{}
		b := setupCompute(t, computeOpts{
			sim:    func(c *apisim.ComputeConfig) { c.TokenLifetime = life },
			client: func(c *apiclient.ComputeConfig) { c.OnToken = ev.add },
			wrap:   wrap,
		})
		return b, ev
	}
	logins := func(b *computeBundle) int64 { return b.count("requests:" + apisim.EndpointComputeTokens + ":200") }
	renewals := func(b *computeBundle) int64 {
		return b.count("requests:" + apisim.EndpointComputeTokensNext + ":200")
	}

	t.Run("a client running past a token's life renews it instead of logging in", func(t *testing.T) {
		t.Parallel()
		b, ev := setup(t, nil)
		s := b.session(t)
		// Ten token lives, a call every ten minutes.
		for range 60 {
			if _, err := s.Clusters(ctx); err != nil {
				t.Fatalf("Clusters at %s: %v", b.clock.Now().Format(time.TimeOnly), err)
			}
			b.clock.Advance(10 * time.Minute)
		}
		if n := logins(b); n != 1 {
			t.Errorf("logins = %d, want 1 (the first)", n)
		}
		if n := renewals(b); n < 9 {
			t.Errorf("renewals = %d, want at least 9 over ten token lives", n)
		}
		if n := b.count("requests:" + apisim.EndpointComputeCluster + ":401"); n != 0 {
			t.Errorf("%d calls met an expired token", n)
		}
		if ev.get("login") != 1 || int64(ev.get("renewal")) != renewals(b) {
			t.Errorf("OnToken saw %d logins and %d renewals, the simulator %d and %d", ev.get("login"), ev.get("renewal"), logins(b), renewals(b))
		}
	})

	t.Run("a token past its expiry takes a new login", func(t *testing.T) {
		t.Parallel()
		b, ev := setup(t, nil)
		s := b.session(t)
		if _, err := s.Clusters(ctx); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * life)
		if _, err := s.Clusters(ctx); err != nil {
			t.Fatalf("Clusters after expiry: %v", err)
		}
		if n := logins(b); n != 2 {
			t.Errorf("logins = %d, want 2: past expiry only a login works", n)
		}
		if n := b.sim.Counters().Requests(apisim.EndpointComputeTokensNext); n != 0 {
			t.Errorf("renewals tried = %d, want 0 for an expired token", n)
		}
		if ev.get("login") != 2 {
			t.Errorf("OnToken logins = %d, want 2", ev.get("login"))
		}
	})

	t.Run("a refused renewal falls back to a login", func(t *testing.T) {
		t.Parallel()
		// The platform's answer to a renewal it will not make: an error
		// envelope in an HTTP 200 (one client reads 10008 there).
		b, ev := setup(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/tokens/next") {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"code":"10008","msg":"token cannot be renewed","data":null}`)
					return
				}
				h.ServeHTTP(w, r)
			})
		})
		s := b.session(t)
		if _, err := s.Clusters(ctx); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(life * 9 / 10)
		if _, err := s.Clusters(ctx); err != nil {
			t.Fatalf("Clusters after a refused renewal: %v", err)
		}
		if n := logins(b); n != 2 {
			t.Errorf("logins = %d, want 2 (the fallback)", n)
		}
		if ev.get("renewal") != 0 {
			t.Errorf("OnToken renewals = %d, want 0", ev.get("renewal"))
		}
		if n := b.count("requests:" + apisim.EndpointComputeCluster + ":401"); n != 0 {
			t.Errorf("%d calls met an expired token", n)
		}
	})

	t.Run("a renewed-away token is still scrubbed from errors", func(t *testing.T) {
		t.Parallel()
		var echo atomic.Pointer[string]
		b, _ := setup(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if old := echo.Load(); old != nil && strings.HasPrefix(r.URL.Path, "/hpc/") {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"code":"10004","msg":"bad token `+*old+`","data":null}`)
					return
				}
				h.ServeHTTP(w, r)
			})
		})
		s := b.session(t)
		if _, err := s.Clusters(ctx); err != nil {
			t.Fatal(err)
		}
		old := b.currentTokens(t)[0]
		b.clock.Advance(life * 9 / 10)
		echo.Store(&old)
		_, err := s.Clusters(ctx)
		if err == nil {
			t.Fatal("Clusters succeeded against an error envelope")
		}
		if b.currentTokens(t)[0] == old {
			t.Fatal("the token was not renewed")
		}
		computeNoSecret(t, err, old)
	})

	t.Run("a renewal that hands the same token back is followed by a login", func(t *testing.T) {
		t.Parallel()
		b, ev := setup(t, func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/tokens/next") {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"code":"0","msg":"success","data":"`+r.Header.Get("token")+`"}`)
					return
				}
				h.ServeHTTP(w, r)
			})
		})
		s := b.session(t)
		if _, err := s.Clusters(ctx); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(life * 9 / 10)
		for range 3 {
			if _, err := s.Clusters(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if n := logins(b); n != 2 {
			t.Errorf("logins = %d, want 2: the unchanged token is replaced by a login", n)
		}
		if n := ev.get("renewal"); n != 0 {
			t.Errorf("OnToken renewals = %d, want 0", n)
		}
	})

}

// While the token service fails (renewal and login alike), a token due
// for renewal still works until its expiry: the calls sharing it use it,
// and one of them tries again a little later, not every call in turn.
func TestComputeTokenRenewalFailingIsTriedOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const life = time.Hour
	var down atomic.Bool
	var renewals, logins atomic.Int64
	b := setupCompute(t, computeOpts{
		sim: func(c *apisim.ComputeConfig) { c.TokenLifetime = life },
		wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next := strings.HasSuffix(r.URL.Path, "/tokens/next")
				login := strings.HasSuffix(r.URL.Path, "/v2/tokens")
				if next {
					renewals.Add(1)
				}
				if login {
					logins.Add(1)
				}
				if down.Load() && (next || login) {
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, `{"code":"10008","msg":"permission denied","data":null}`)
					return
				}
				h.ServeHTTP(w, r)
			})
		},
	})
	s := b.session(t)
	if _, err := s.Clusters(ctx); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(life * 9 / 10)
	down.Store(true)
	renewals.Store(0)
	logins.Store(0)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if _, err := s.Clusters(ctx); err != nil {
					t.Errorf("Clusters with a token still valid: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := renewals.Load(); n != 1 {
		t.Errorf("renewals tried = %d by 40 calls, want 1", n)
	}
	if n := logins.Load(); n != 1 {
		t.Errorf("logins tried = %d by 40 calls, want 1", n)
	}
	// A little later the renewal is tried again, and works.
	down.Store(false)
	b.clock.Advance(2 * time.Minute)
	if _, err := s.Clusters(ctx); err != nil {
		t.Fatal(err)
	}
	if n := b.count("requests:" + apisim.EndpointComputeTokensNext + ":200"); n != 1 {
		t.Errorf("renewals made = %d, want 1 once the service is back", n)
	}
}
