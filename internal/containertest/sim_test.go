package containertest

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/devstack"
)

// simOptions tunes the simulators.
type simOptions struct {
	// taskTime is how long a media task takes. Defaults to 2s.
	taskTime time.Duration
	// computeTime is how long a compute job runs. Defaults to 2s.
	computeTime time.Duration
}

// simulator serves both upstream APIs from the test process, so that a
// test counts every paid submission and can slow result downloads down.
type simulator struct {
	media   *apisim.Media
	compute *apisim.Compute
	// url is the base URL the containers reach the simulators at.
	url string
	// resultRate, when positive, limits every result download to this many
	// bytes per second.
	resultRate atomic.Int64
}

func startSimulator(t *testing.T, o simOptions) *simulator {
	t.Helper()
	// Every interface: the containers come in through the Docker bridge.
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatalf("simulator listener: %v", err)
	}
	s := &simulator{url: fmt.Sprintf("http://%s:%d", hostAlias, ln.Addr().(*net.TCPAddr).Port)}
	// The simulator runs on the host, where the stack's S3 name (s3:7070,
	// in the presigned input URLs) does not resolve: the workers' own
	// preflight checks the inputs here, the simulator does not fetch them.
	s.media = apisim.NewMedia(apisim.MediaConfig{
		APIKey: mediaKey, TaskDuration: cmp.Or(o.taskTime, 2*time.Second), ResultSize: 256 << 10, ResultBaseURL: s.url,
		SkipInputChecks: true,
	})
	s.compute = apisim.NewCompute(apisim.ComputeConfig{
		User: computeUser, Password: computePass, OrgID: computeOrg, BaseURL: s.url,
		QueuedFor: 500 * time.Millisecond, RunFor: cmp.Or(o.computeTime, 2*time.Second), Root: t.TempDir(),
	})
	srv := &http.Server{Handler: s.throttled(devstack.Handler(s.media, s.compute)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = s.compute.Close()
	})
	return s
}

// submits returns how many times upstream accepted the video prompt or
// speech text, or the compute job named so: more than one is a second
// paid submission.
func (s *simulator) submits(promptOrJobName string) int64 {
	return s.media.SubmitCount(promptOrJobName) + s.compute.SubmitCount(promptOrJobName)
}

// throttled applies resultRate to the media results.
func (s *simulator) throttled(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rate := s.resultRate.Load(); rate > 0 && strings.HasPrefix(r.URL.Path, "/sim/results/") {
			w = &slowWriter{ResponseWriter: w, rate: rate}
		}
		next.ServeHTTP(w, r)
	})
}

// slowWriter writes at most rate bytes per second.
type slowWriter struct {
	http.ResponseWriter
	rate int64
}

func (w *slowWriter) Write(p []byte) (int, error) {
	const chunk = 32 << 10
	var n int
	for len(p) > 0 {
		c := min(len(p), chunk)
		m, err := w.ResponseWriter.Write(p[:c])
		n += m
		if err != nil {
			return n, err
		}
		time.Sleep(time.Duration(int64(c) * int64(time.Second) / w.rate))
		p = p[c:]
	}
	return n, nil
}
