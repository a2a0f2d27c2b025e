package apiclient_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/testenv"
)

const (
	computeUser     = "alice-login"
	computePassword = "pw-Very-Secret-42"
	computeOrg      = "org-7731"
)

// computeBundle is one simulator behind an httptest server and a client.
type computeBundle struct {
	sim    *apisim.Compute
	srv    *httptest.Server
	client *apiclient.Compute
	clock  *testenv.Clock
	sleep  *testenv.Sleeper
}

// computeOpts tunes setupCompute.
type computeOpts struct {
	sim    func(*apisim.ComputeConfig)
	client func(*apiclient.ComputeConfig)
	// wrap, if set, sits between the server and the simulator.
	wrap func(http.Handler) http.Handler
}

func setupCompute(t testing.TB, o computeOpts) *computeBundle {
	t.Helper()
	clock := testenv.NewClock()
	scfg := apisim.ComputeConfig{
		User: computeUser, Password: computePassword, OrgID: computeOrg,
		QueuedFor: 10 * time.Second, RunFor: time.Minute,
		Now: clock.Now, Root: t.TempDir(),
		// Ended jobs stay in the realtime detail for a day unless a test
		// shortens it: the tests that read a finished job there jump the
		// clock by hours.
		HistoryDelay: 24 * time.Hour,
	}
	if o.sim != nil {
		o.sim(&scfg)
	}
	sim := apisim.NewCompute(scfg)
	var h http.Handler = sim
	if o.wrap != nil {
		h = o.wrap(sim)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	sleep := &testenv.Sleeper{Clock: clock}
	ccfg := apiclient.ComputeConfig{
		BaseURL: srv.URL, User: computeUser, Password: computePassword, OrgID: computeOrg,
		HTTPClient: srv.Client(), Sleep: sleep.Sleep, Now: clock.Now,
		Backoff: backoff.Exponential{Min: time.Second, Max: 4 * time.Second},
	}
	if o.client != nil {
		o.client(&ccfg)
	}
	client, err := apiclient.NewCompute(ccfg)
	if err != nil {
		t.Fatalf("NewCompute: %v", err)
	}
	return &computeBundle{sim: sim, srv: srv, client: client, clock: clock, sleep: sleep}
}

// session resolves the default cluster.
func (b *computeBundle) session(t *testing.T) *apiclient.ClusterSession {
	t.Helper()
	s, err := b.client.Cluster(context.Background(), "")
	if err != nil {
		t.Fatalf("Cluster: %v", err)
	}
	return s
}

// count reads a simulator counter.
func (b *computeBundle) count(name string) int64 { return b.sim.Counters().Get(name) }

// currentTokens asks the simulator for the live tokens (without going
// through the client).
func (b *computeBundle) currentTokens(t *testing.T) []string {
	t.Helper()
	toks, err := b.client.Tokens(context.Background())
	if err != nil {
		t.Fatalf("Tokens: %v", err)
	}
	var out []string
	for _, e := range toks {
		out = append(out, e.Token)
	}
	return out
}

// computeNoSecret fails when err's text holds the password or one of the
// extra secrets (the user name is not a secret).
func computeNoSecret(t *testing.T, err error, extra ...string) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range append([]string{computePassword}, extra...) {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error leaks a secret %q: %v", s, err)
		}
	}
}

// deadURL returns the address of a closed listener: connections to it are
// refused.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "http://" + addr
}

func TestNewComputeValidates(t *testing.T) {
	t.Parallel()
	good := apiclient.ComputeConfig{BaseURL: "https://ac.example.test", User: computeUser, Password: computePassword, OrgID: computeOrg}
	tests := []struct {
		name  string
		edit  func(*apiclient.ComputeConfig)
		field string
	}{
		{"no base url", func(c *apiclient.ComputeConfig) { c.BaseURL = "" }, "BaseURL"},
		{"relative base url", func(c *apiclient.ComputeConfig) { c.BaseURL = "ac.example.test" }, "BaseURL"},
		{"ftp base url", func(c *apiclient.ComputeConfig) { c.BaseURL = "ftp://ac.example.test" }, "BaseURL"},
		{"user info in base url", func(c *apiclient.ComputeConfig) { c.BaseURL = "https://u:" + computePassword + "@ac.example.test" }, "BaseURL"},
		{"query in base url", func(c *apiclient.ComputeConfig) { c.BaseURL = "https://ac.example.test/?x=1" }, "BaseURL"},
		{"no user", func(c *apiclient.ComputeConfig) { c.User = "" }, "User"},
		{"no password", func(c *apiclient.ComputeConfig) { c.Password = "" }, "Password"},
		{"no org", func(c *apiclient.ComputeConfig) { c.OrgID = "" }, "OrgID"},
		{"negative attempts", func(c *apiclient.ComputeConfig) { c.MaxAttempts = -1 }, "MaxAttempts"},
		{"negative timeout", func(c *apiclient.ComputeConfig) { c.AttemptTimeout = -time.Second }, "AttemptTimeout"},
		{"negative backoff", func(c *apiclient.ComputeConfig) { c.Backoff.Min = -time.Second }, "Backoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := good
			tt.edit(&cfg)
			_, err := apiclient.NewCompute(cfg)
			if !errors.Is(err, apiclient.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			if !strings.Contains(err.Error(), "ComputeConfig."+tt.field) {
				t.Errorf("err = %v, want it to name ComputeConfig.%s", err, tt.field)
			}
			computeNoSecret(t, err)
		})
	}
	if _, err := apiclient.NewCompute(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
}

func TestComputeTokens(t *testing.T) {
	t.Parallel()
	t.Run("fetched once and cached", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		ctx := context.Background()
		toks, err := b.client.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) != 3 || toks[0].ClusterName != "cluster-a" || toks[0].ClusterID != "1001" ||
			toks[1].ClusterName != "cluster-b" || toks[1].ClusterID != "1002" || toks[0].Token == "" {
			t.Fatalf("tokens = %v", toks)
		}
		if _, err := b.client.Tokens(ctx); err != nil {
			t.Fatal(err)
		}
		if n := b.count("requests:compute.tokens:200"); n != 1 {
			t.Errorf("token calls = %d, want 1 (cached)", n)
		}
		for _, s := range []string{fmt.Sprint(toks[0]), fmt.Sprintf("%+v", toks[0]), fmt.Sprintf("%#v", toks[0])} {
			if strings.Contains(s, toks[0].Token) {
				t.Errorf("formatted token entry leaks the token: %s", s)
			}
		}
	})
	t.Run("bad credentials", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.Password = "other" }})
		_, err := b.client.Tokens(context.Background())
		if !errors.Is(err, apiclient.ErrUnauthorized) {
			t.Fatalf("err = %v, want ErrUnauthorized", err)
		}
		env, ok := errors.AsType[*apiclient.EnvelopeError](err)
		if !ok || env.Status != http.StatusUnauthorized || env.Code != apisim.ComputeCodeBadCredentials {
			t.Fatalf("err = %#v, want a 401 EnvelopeError with code %s", err, apisim.ComputeCodeBadCredentials)
		}
		if apiclient.IsTransient(err) || !apiclient.IsPermanent(err) {
			t.Errorf("bad credentials must be permanent: %v", err)
		}
		if n := b.count("requests:compute.tokens:401"); n != 1 {
			t.Errorf("token calls = %d, want 1 (no retry of a 401)", n)
		}
		computeNoSecret(t, err)
	})
	t.Run("retried on 5xx", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		b.sim.Faults().Set(apisim.EndpointComputeTokens, apisim.Fault{Error5xxRate: 1})
		b.sleep.OnWait(func(int) { b.sim.Faults().Reset() })
		if _, err := b.client.Tokens(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(b.sleep.Waits()) != 1 {
			t.Errorf("waits = %v, want one retry", b.sleep.Waits())
		}
	})
}

func TestComputeCluster(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{})
	ctx := context.Background()

	s := b.session(t)
	if s.ClusterName() != "cluster-a" || s.ClusterID() != "1001" || s.UserName() != computeUser {
		t.Errorf("default session = %s/%s/%s", s.ClusterName(), s.ClusterID(), s.UserName())
	}
	byName, err := b.client.Cluster(ctx, "cluster-b")
	if err != nil {
		t.Fatal(err)
	}
	byID, err := b.client.Cluster(ctx, "1002")
	if err != nil {
		t.Fatal(err)
	}
	if byName != byID || byName.ClusterID() != "1002" {
		t.Errorf("cluster-b by name and id: %p %p %s", byName, byID, byName.ClusterID())
	}
	if again, _ := b.client.Cluster(ctx, ""); again != s {
		t.Error("sessions are not cached")
	}
	if n := b.count("requests:compute.center:200"); n != 2 {
		t.Errorf("center calls = %d, want one per cluster", n)
	}
	if _, err := b.client.Cluster(ctx, "cluster-z"); !errors.Is(err, apiclient.ErrClusterNotFound) {
		t.Errorf("unknown cluster: err = %v, want ErrClusterNotFound", err)
	}

	center, err := s.Center(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if center.ClusterUserInfo.UserName != computeUser || len(center.EfileURLs) != 2 || center.EfileURLs[0].Enable != "false" {
		t.Errorf("center = %+v", center)
	}

	clusters, err := s.Clusters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters) != 1 || clusters[0].ID != 2001 || clusters[0].JobManagerType != "SLURM" {
		t.Errorf("clusters = %+v", clusters)
	}
	sched, err := s.SchedulerID(ctx)
	if err != nil || sched != "2001" {
		t.Fatalf("SchedulerID = %q, %v", sched, err)
	}
	queues, err := s.Queues(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(queues) != 3 || queues[0].QueueName != "debug" || queues[1].QueMaxWalltime != "72:00:00" {
		t.Errorf("queues = %+v", queues)
	}

	t.Run("queues of another user", func(t *testing.T) {
		_, err := s.Queues(ctx, "mallory", sched)
		env, ok := errors.AsType[*apiclient.EnvelopeError](err)
		if !ok || env.Status != http.StatusOK || env.Code != apisim.ComputeCodeInvalid || !strings.Contains(env.Msg, "user_name") {
			t.Fatalf("err = %v, want an envelope error naming user_name", err)
		}
		if apiclient.IsTransient(err) {
			t.Error("an error envelope is not transient")
		}
	})
	t.Run("queues of another scheduler", func(t *testing.T) {
		_, err := s.Queues(ctx, "", "9999")
		env, ok := errors.AsType[*apiclient.EnvelopeError](err)
		if !ok || env.Code != apisim.ComputeCodeInvalid || !strings.Contains(env.Msg, "strJobManagerID") {
			t.Fatalf("err = %v, want an envelope error naming strJobManagerID", err)
		}
	})
}

func TestComputeClusterConcurrentResolve(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{})
	var wg sync.WaitGroup
	sessions := make([]*apiclient.ClusterSession, 8)
	for i := range sessions {
		wg.Go(func() {
			s, err := b.client.Cluster(context.Background(), "cluster-a")
			if err != nil {
				t.Error(err)
			}
			sessions[i] = s
		})
	}
	wg.Wait()
	for _, s := range sessions {
		if s != sessions[0] {
			t.Fatal("concurrent resolves built different sessions")
		}
	}
	if n, c := b.count("requests:compute.tokens:200"), b.count("requests:compute.center:200"); n != 1 || c != 1 {
		t.Errorf("tokens %d, center %d calls; want 1 and 1", n, c)
	}
}

func TestComputeRetriesReads(t *testing.T) {
	t.Parallel()
	t.Run("5xx then success", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		b.sim.Faults().Set(apisim.EndpointComputeCluster, apisim.Fault{Error5xxRate: 1})
		b.sleep.OnWait(func(n int) {
			if n == 2 {
				b.sim.Faults().Reset()
			}
		})
		if _, err := s.Clusters(context.Background()); err != nil {
			t.Fatal(err)
		}
		if w := b.sleep.Waits(); len(w) != 2 {
			t.Errorf("waits = %v, want 2", w)
		}
	})
	t.Run("gives up after MaxAttempts", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{client: func(c *apiclient.ComputeConfig) { c.MaxAttempts = 3 }})
		s := b.session(t)
		b.sim.Faults().Set(apisim.EndpointComputeCluster, apisim.Fault{Error5xxRate: 1})
		_, err := s.Clusters(context.Background())
		if err == nil || !apiclient.IsTransient(err) {
			t.Fatalf("err = %v, want a transient error", err)
		}
		total := b.count("requests:compute.cluster:500") + b.count("requests:compute.cluster:503")
		if total != 3 {
			t.Errorf("attempts = %d, want 3", total)
		}
	})
	t.Run("429 honours Retry-After", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		b.sim.Faults().Set(apisim.EndpointComputeQueues, apisim.Fault{Error429Rate: 1, RetryAfter: 7 * time.Second})
		b.sleep.OnWait(func(int) { b.sim.Faults().Reset() })
		if _, err := s.Queues(context.Background(), "", ""); err != nil {
			t.Fatal(err)
		}
		if w := b.sleep.Waits(); len(w) != 1 || w[0] != 7*time.Second {
			t.Errorf("waits = %v, want [7s]", w)
		}
	})
	t.Run("long Retry-After is handed to the caller", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		b.sim.Faults().Set(apisim.EndpointComputeCluster, apisim.Fault{Error429Rate: 1, RetryAfter: 10 * time.Minute})
		_, err := s.Clusters(context.Background())
		if d, ok := apiclient.RetryAfterOf(err); !ok || d != 10*time.Minute {
			t.Fatalf("RetryAfterOf(%v) = %v, %v; want 10m", err, d, ok)
		}
		if len(b.sleep.Waits()) != 0 {
			t.Errorf("waited %v, want no wait", b.sleep.Waits())
		}
	})
	t.Run("malformed answer is retried", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		b.sim.Faults().Set(apisim.EndpointComputeCluster, apisim.Fault{MalformedRate: 1})
		b.sleep.OnWait(func(int) { b.sim.Faults().Reset() })
		if _, err := s.Clusters(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("hung answer times out and is retried", func(t *testing.T) {
		t.Parallel()
		// One request hangs (Times: 1) and only the attempt timeout ends
		// it; the timeout is far above what an answer takes on a loaded
		// machine, and an answer slow enough to be retried as well would
		// not fail the test: it asserts the retry, not the count.
		b := setupCompute(t, computeOpts{client: func(c *apiclient.ComputeConfig) { c.AttemptTimeout = time.Second }})
		s := b.session(t)
		b.sim.Faults().Set(apisim.EndpointComputeCluster, apisim.Fault{HangRate: 1, Times: 1})
		if _, err := s.Clusters(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(b.sleep.Waits()) == 0 {
			t.Errorf("no wait: the hung answer was not retried")
		}
	})
	t.Run("cancelled context stops at once", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s := b.session(t)
		b.sim.Faults().Set(apisim.EndpointComputeCluster, apisim.Fault{Error5xxRate: 1})
		ctx, cancel := context.WithCancel(context.Background())
		b.sleep.OnWait(func(int) { cancel() })
		_, err := s.Clusters(ctx)
		if !errors.Is(err, context.Canceled) || apiclient.IsTransient(err) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	})
}

func TestComputeFailover(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.DeadURL = deadURL(t) }})
	ctx := context.Background()
	s := b.session(t)
	// hpc: the dead address is listed first.
	if _, err := s.Clusters(ctx); err != nil {
		t.Fatalf("Clusters with a dead first hpc url: %v", err)
	}
	// efile: dead first, then a disabled one, then the simulator.
	if err := s.Upload(ctx, "/public/home/alice/in", "a.txt", true, computeOpen("hello")); err != nil {
		t.Fatalf("Upload with a dead first efile url: %v", err)
	}
	rc, err := s.Download(ctx, "/public/home/alice/in/a.txt")
	if err != nil {
		t.Fatalf("Download with a dead first efile url: %v", err)
	}
	_ = rc.Close()
	if w := b.sleep.Waits(); len(w) != 0 {
		t.Errorf("failover waited %v, want no pause", w)
	}
}

func TestComputeAllAddressesDead(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{client: func(c *apiclient.ComputeConfig) { c.MaxAttempts = 2 }})
	s := b.session(t)
	if _, err := s.SchedulerID(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.srv.Close()
	_, err := s.SubmitJob(context.Background(), "BASIC", "BASE", computeJobRequest("never", "/x/job.sh"))
	if err == nil || errors.Is(err, apiclient.ErrAmbiguous) || !apiclient.IsTransient(err) {
		t.Fatalf("err = %v, want a transient, unambiguous error (nothing was sent)", err)
	}
	if strings.Contains(err.Error(), "?") {
		t.Errorf("error shows a query: %v", err)
	}
	if b.sim.SubmitCount("never") != 0 {
		t.Error("a job was created")
	}
}
