package apiclient_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/apisim"
)

// TestBaseURLRule: the media client, the compute client and the worker's
// configuration (through ParseBaseURL) accept and refuse the same base
// addresses, and no error repeats one.
func TestBaseURLRule(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"https://api.example.test", true},
		{"http://127.0.0.1:8080/prefix/", true},
		{"https://api.example.test/a%2Fb/", true},
		{"", false},
		{"api.example.test", false},
		{"ftp://api.example.test", false},
		{"https://", false},
		{"https://u:p4ss@api.example.test", false},
		{"https://api.example.test/?sig=p4ss", false},
		{"https://api.example.test/?", false},
		{"https://api.example.test/#p4ss", false},
		{"https://h:port:x/%zz", false},
	} {
		_, perr := apiclient.ParseBaseURL(tt.url)
		_, merr := apiclient.NewMedia(apiclient.MediaConfig{BaseURL: tt.url, APIKey: "k"})
		_, cerr := apiclient.NewCompute(apiclient.ComputeConfig{BaseURL: tt.url, User: "u", Password: "pw", OrgID: "o"})
		for name, err := range map[string]error{"ParseBaseURL": perr, "NewMedia": merr, "NewCompute": cerr} {
			if (err == nil) != tt.ok {
				t.Errorf("%s(%q): err = %v, want ok %v", name, tt.url, err, tt.ok)
			}
			if err != nil && strings.Contains(err.Error(), "p4ss") {
				t.Errorf("%s(%q): error repeats the address: %v", name, tt.url, err)
			}
		}
		for name, err := range map[string]error{"NewMedia": merr, "NewCompute": cerr} {
			if err != nil && (!errors.Is(err, apiclient.ErrInvalidArgument) || !strings.Contains(err.Error(), "BaseURL")) {
				t.Errorf("%s(%q): err = %v, want ErrInvalidArgument naming BaseURL", name, tt.url, err)
			}
		}
	}
	for _, hostPort := range []string{"127.0.0.1:7070", "localhost:7070", "s3.example.test"} {
		if _, err := apiclient.ParseBaseURL(hostPort); err == nil || !strings.Contains(err.Error(), "has no scheme: want a URL such as http://") {
			t.Errorf("ParseBaseURL(%q) = %v, want it to ask for the scheme", hostPort, err)
		}
	}
	u, err := apiclient.ParseBaseURL("https://api.example.test/a%2Fb//")
	if err != nil || u.String() != "https://api.example.test/a%2Fb" {
		t.Errorf("ParseBaseURL keeps %v, %v; want the escaped prefix without trailing slashes", u, err)
	}
}

// unwritableConn is a connection that was made but refuses every write:
// not a byte of the request reaches the server.
type unwritableConn struct{ net.Conn }

func (unwritableConn) Write([]byte) (int, error) { return 0, errors.New("write refused by the test") }

// breakingTransport dials normally, but once broken() reports true, a
// connection to host refuses its writes. It keeps no idle connections, so
// every request dials.
func breakingTransport(host func() string, broken func() bool) *http.Transport {
	var d net.Dialer
	return &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err == nil && broken() && addr == host() {
				return unwritableConn{conn}, nil
			}
			return conn, err
		},
	}
}

// TestSentRuleMedia: the media client's paid calls follow traceSent's
// rule: repeated when no connection was made, ambiguous (and never
// repeated) once one was, even when not a byte was written; reads retry
// either way.
func TestSentRuleMedia(t *testing.T) {
	t.Parallel()
	t.Run("no connection: the submit is repeated", func(t *testing.T) {
		t.Parallel()
		b := setupMedia(t, func(c *apiclient.MediaConfig) {
			c.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: refusingDialer(t, 1)}}
		})
		if _, err := b.client.SubmitVideo(t.Context(), videoReq("sent rule refused")); err != nil {
			t.Fatal(err)
		}
		if n := b.sim.SubmitCount("sent rule refused"); n != 1 || len(b.sleep.Waits()) != 1 {
			t.Errorf("SubmitCount %d after %d waits, want 1 after 1", n, len(b.sleep.Waits()))
		}
	})
	t.Run("a connection, nothing written: the submit is ambiguous", func(t *testing.T) {
		t.Parallel()
		var b *mediaBundle
		b = setupMedia(t, func(c *apiclient.MediaConfig) {
			c.HTTPClient = &http.Client{Transport: breakingTransport(
				func() string { return b.srv.Listener.Addr().String() }, func() bool { return true })}
			c.MaxAttempts = 3
		})
		_, err := b.client.SubmitVideo(t.Context(), videoReq("sent rule unwritten"))
		if !errors.Is(err, apiclient.ErrAmbiguous) || len(b.sleep.Waits()) != 0 {
			t.Fatalf("submit: %v after %d waits, want ErrAmbiguous and no retry", err, len(b.sleep.Waits()))
		}
		if n := b.sim.Counters().Requests(apisim.EndpointVideoSubmit); n != 0 {
			t.Errorf("the server saw %d submits, want 0", n)
		}
		_, err = b.client.GetTask(t.Context(), "t-1")
		if errors.Is(err, apiclient.ErrAmbiguous) || !apiclient.IsTransient(err) || len(b.sleep.Waits()) != 2 {
			t.Fatalf("get: %v after %d waits, want a transient error after 2 retries", err, len(b.sleep.Waits()))
		}
	})
}

// TestSentRuleComputeFailover: the compute client follows the same rule,
// and it also decides failover: a submit moves on to the next hpc address
// only when no connection was made to the first.
func TestSentRuleComputeFailover(t *testing.T) {
	t.Parallel()
	// first serves the same simulator as the base URL and is listed first
	// among the hpc addresses.
	setup := func(t *testing.T, broken func() bool) (*computeBundle, *httptest.Server) {
		var first *httptest.Server
		var sim http.Handler
		first = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { sim.ServeHTTP(w, r) }))
		t.Cleanup(first.Close)
		b := setupCompute(t, computeOpts{
			sim: func(c *apisim.ComputeConfig) { c.DeadURL = first.URL },
			client: func(c *apiclient.ComputeConfig) {
				c.HTTPClient = &http.Client{Transport: breakingTransport(func() string { return first.Listener.Addr().String() }, broken)}
			},
		})
		sim = b.sim
		return b, first
	}

	t.Run("no connection: the next address takes the submit", func(t *testing.T) {
		t.Parallel()
		b, first := setup(t, func() bool { return false })
		s := b.session(t)
		script := uploadScript(t, s, "/jobs/failover", "echo hi\n")
		first.Close() // connections to the first address are now refused
		if _, err := s.SubmitJob(context.Background(), "BASIC", "BASE", computeJobRequest("failover", script)); err != nil {
			t.Fatal(err)
		}
		if n := b.sim.SubmitCount("failover"); n != 1 {
			t.Errorf("SubmitCount %d, want 1", n)
		}
		if w := b.sleep.Waits(); len(w) != 0 {
			t.Errorf("failover waited %v, want no pause", w)
		}
	})
	t.Run("a connection, nothing written: ambiguous, no other address", func(t *testing.T) {
		t.Parallel()
		var broken atomic.Bool
		b, _ := setup(t, broken.Load)
		s := b.session(t)
		script := uploadScript(t, s, "/jobs/unwritten", "echo hi\n")
		if _, err := s.SchedulerID(context.Background()); err != nil { // read before the break
			t.Fatal(err)
		}
		broken.Store(true)
		_, err := s.SubmitJob(context.Background(), "BASIC", "BASE", computeJobRequest("unwritten", script))
		if !errors.Is(err, apiclient.ErrAmbiguous) || apiclient.IsTransient(err) {
			t.Fatalf("err = %v, want ErrAmbiguous, not transient", err)
		}
		if n := b.sim.Counters().Requests(apisim.EndpointComputeSubmit); n != 0 {
			t.Errorf("submits seen by any address = %d, want 0", n)
		}
		if w := b.sleep.Waits(); len(w) != 0 {
			t.Errorf("waited %v, want no retry", w)
		}
		computeNoSecret(t, err, b.currentTokens(t)...)
	})
}
