package apiclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// listJobs submits n jobs of a long run and returns their ids.
func listJobs(t *testing.T, s *apiclient.ClusterSession, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = submitted(t, s, fmt.Sprintf("listed-%02d", i), "#SIM runfor 1h\n")
	}
	return ids
}

// listReads counts the realtime list's requests, whatever their answer.
func listReads(b *computeBundle) int64 {
	var n int64
	for k, v := range b.sim.Counters().Snapshot() {
		if strings.HasPrefix(k, "requests:"+apisim.EndpointComputeJobs+":") {
			n += v
		}
	}
	return n
}

// One walk of the realtime list, a page at a time, serves every job of
// the region until it is maxAge old; callers meanwhile share it.
func TestListedJobOneWalkServesEveryJob(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{sim: func(c *apisim.ComputeConfig) { c.ListPageLimit = 10 }})
	s, ctx := b.session(t), context.Background()
	ids := listJobs(t, s, 25)
	before := listReads(b)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for _, id := range ids {
		wg.Go(func() {
			d, err := s.ListedJob(ctx, id, time.Minute)
			if err != nil || d.JobID != id || apiclient.JobPhaseOf(d) != apiclient.JobQueued {
				t.Errorf("ListedJob(%s) = %+v, %v; want it queued", id, d, err)
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := listReads(b) - before; n != 3 {
		t.Errorf("%d list requests for 25 jobs in pages of 10, want 3 (one walk)", n)
	}
	b.clock.Advance(2 * time.Minute)
	if d, err := s.ListedJob(ctx, ids[0], time.Minute); err != nil || apiclient.JobPhaseOf(d) != apiclient.JobRunning {
		t.Fatalf("after maxAge: %+v, %v; want a new walk showing it running", d, err)
	}
	if n := listReads(b) - before; n != 6 {
		t.Errorf("%d list requests after maxAge, want 6 (a second walk)", n)
	}
	if _, err := s.ListedJob(ctx, "999999", time.Minute); !errors.Is(err, apiclient.ErrNotListed) || errors.Is(err, apiclient.ErrJobNotFound) {
		t.Errorf("a job the list does not show: %v, want ErrNotListed and not ErrJobNotFound", err)
	}
}

// The list's failures never read as a job's end: an error envelope, a
// missing route (remembered, then asked again), a page lost mid-walk.
func TestListedJobFailuresSayNothingOfTheEnd(t *testing.T) {
	t.Parallel()
	t.Run("10001", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{client: func(c *apiclient.ComputeConfig) { c.MaxAttempts = 1 }})
		s := b.session(t)
		id := listJobs(t, s, 1)[0]
		b.sim.AnswerBusy(apisim.EndpointComputeJobs, 5)
		_, err := s.ListedJob(context.Background(), id, time.Minute)
		if err == nil || errors.Is(err, apiclient.ErrJobNotFound) || errors.Is(err, apiclient.ErrNotSupported) {
			t.Fatalf("list answered 10001: %v, want an error that is neither not-found nor not-supported", err)
		}
	})
	t.Run("no route", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{})
		s, ctx := b.session(t), context.Background()
		id := listJobs(t, s, 1)[0]
		b.sim.Faults().Set(apisim.EndpointComputeJobs, apisim.Fault{NoRouteRate: 1})
		for range 3 {
			b.clock.Advance(time.Minute)
			if _, err := s.ListedJob(ctx, id, time.Second); !errors.Is(err, apiclient.ErrNotSupported) {
				t.Fatalf("list answered 404: %v, want ErrNotSupported", err)
			}
		}
		if n := listReads(b); n != 1 {
			t.Errorf("%d list requests, want 1: a missing route is remembered", n)
		}
		b.sim.Faults().Reset()
		b.clock.Advance(11 * time.Minute)
		if d, err := s.ListedJob(ctx, id, time.Second); err != nil || d.JobID != id {
			t.Fatalf("after the remembered while: %+v, %v; want the list asked again", d, err)
		}
	})
	t.Run("page lost", func(t *testing.T) {
		t.Parallel()
		b := setupCompute(t, computeOpts{
			sim:    func(c *apisim.ComputeConfig) { c.ListPageLimit = 10 },
			client: func(c *apiclient.ComputeConfig) { c.MaxAttempts = 1 },
			wrap:   failPage("start=10"),
		})
		s, ctx := b.session(t), context.Background()
		ids := listJobs(t, s, 15)
		if d, err := s.ListedJob(ctx, ids[0], time.Minute); err != nil || d.JobID != ids[0] {
			t.Fatalf("a job of the first page: %+v, %v; want it listed", d, err)
		}
		if _, err := s.ListedJob(ctx, ids[12], time.Minute); !errors.Is(err, apiclient.ErrNotListed) {
			t.Fatalf("a job of the lost page: %v, want ErrNotListed", err)
		}
	})
}

// failPage answers 503 to every list request whose query holds part.
func failPage(part string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hpc/openapi/v2/jobs" && r.Method == http.MethodGet && strings.Contains(r.URL.RawQuery, part) {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// A job that moves to another page while the list is read (the total
// changes between pages) is missed by that walk: ErrNotListed, never an
// end.
func TestListedJobMovedBetweenPages(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{
		sim: func(c *apisim.ComputeConfig) { c.ListPageLimit = 2 },
		wrap: onListPage(2, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			// Between the first and second page two new jobs sort
			// first: the second page repeats the first.
			q := r.URL.Query()
			q.Set("start", "0")
			r.URL.RawQuery = q.Encode()
			next.ServeHTTP(w, r)
		}),
	})
	s, ctx := b.session(t), context.Background()
	ids := listJobs(t, s, 5)
	if _, err := s.ListedJob(ctx, ids[2], time.Minute); !errors.Is(err, apiclient.ErrNotListed) {
		t.Fatalf("a job the walk missed: %v, want ErrNotListed", err)
	}
	if d, err := s.ListedJob(ctx, ids[4], time.Minute); err != nil || d.JobID != ids[4] {
		t.Fatalf("a job of the last page: %+v, %v; want it listed", d, err)
	}
}

// A token that expires between two pages is renewed and the walk goes on.
func TestListedJobTokenExpiresMidWalk(t *testing.T) {
	t.Parallel()
	b := setupCompute(t, computeOpts{
		sim: func(c *apisim.ComputeConfig) { c.ListPageLimit = 2 },
		wrap: onListPage(2, func(w http.ResponseWriter, _ *http.Request, _ http.Handler) {
			// The second page meets an expired token, once.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":"` + apisim.ComputeCodeBadToken + `","msg":"token expired"}`))
		}),
	})
	s, ctx := b.session(t), context.Background()
	ids := listJobs(t, s, 5)
	for _, id := range ids {
		if d, err := s.ListedJob(ctx, id, time.Minute); err != nil || d.JobID != id {
			t.Fatalf("ListedJob(%s) = %+v, %v; want every job listed after the renewal", id, d, err)
		}
	}
	if n := listReads(b); n != 3 {
		t.Errorf("%d list requests reached the simulator, want 3 pages of one walk", n)
	}
}

// onListPage answers the nth request of the realtime list with h; every
// other request goes on to the simulator.
func onListPage(nth int32, h func(w http.ResponseWriter, r *http.Request, next http.Handler)) func(http.Handler) http.Handler {
	var n atomic.Int32
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hpc/openapi/v2/jobs" && r.Method == http.MethodGet && n.Add(1) == nth {
				h(w, r, next)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// The list's items are read leniently: records or list, the status as
// jobStatus, jobState or status, the id as jobId or id, total as a
// number or a string.
func TestListedJobLenientShapes(t *testing.T) {
	t.Parallel()
	body := `{"code":"0","msg":"success","data":{"total":"3","pages":1,"records":[` +
		`{"jobId":"11","jobState":"statR"},{"id":12,"status":"statQ"},{"jobId":13,"jobStatus":"statC","exitCode":"0"}]}}`
	b := setupCompute(t, computeOpts{wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hpc/openapi/v2/jobs" && r.Method == http.MethodGet {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(body))
				return
			}
			next.ServeHTTP(w, r)
		})
	}})
	s, ctx := b.session(t), context.Background()
	for id, want := range map[string]apiclient.JobPhase{"11": apiclient.JobRunning, "12": apiclient.JobQueued, "13": apiclient.JobSucceeded} {
		d, err := s.ListedJob(ctx, id, time.Minute)
		if err != nil || apiclient.JobPhaseOf(d) != want {
			t.Errorf("job %s: %+v, %v; want %s", id, d, err, want)
		}
	}
	if n := b.count("requests:" + apisim.EndpointComputeJobs + ":200"); n != 0 {
		t.Errorf("the wrapped list reached the simulator %d times", n)
	}
}
