package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/redact"
)

// secret is put into URL queries and userinfo; no error may contain it.
const secret = "SECRET-SIGNATURE"

// fetchServer is an httptest server with a few routes:
//
//	/ok            200 "hello" as text/plain
//	/r/{n}         redirects n times, then /ok
//	/to?u=URL      redirects to URL
//	/status/{code} answers code (Retry-After: 3 on 429/503)
//	/bytes/{n}     n bytes, with Content-Length
//	/chunked/{n}   n bytes, without Content-Length
//	/stall         headers, one byte, then nothing until the client leaves
type fetchServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newFetchServer(t *testing.T) *fetchServer {
	t.Helper()
	fs := &fetchServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "hello")
	})
	mux.HandleFunc("/r/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n <= 0 {
			http.Redirect(w, r, "/ok?sig="+secret, http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/r/%d?sig=%s", n-1, secret), http.StatusFound)
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("u"))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "3")
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, "upstream says no, "+secret)
	})
	mux.HandleFunc("/bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = io.WriteString(w, strings.Repeat("b", n))
	})
	mux.HandleFunc("/chunked/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		for range n {
			_, _ = io.WriteString(w, "c")
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "s")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(fs.Close)
	return fs
}

// port returns the server's port.
func (fs *fetchServer) port() string {
	_, port, _ := net.SplitHostPort(fs.Listener.Addr().String())
	return port
}

// fetchAll opens and reads rawURL.
func fetchAll(ctx context.Context, f *Fetcher, rawURL string) (string, string, error) {
	body, ct, err := f.Open(ctx, rawURL)
	if err != nil {
		return "", "", err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	return string(b), ct, err
}

// checkSafe fails when err's text carries the secret.
func checkSafe(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), secret) {
		t.Fatalf("error text carries a URL secret: %v", err)
	}
}

func TestFetcherRefusesPrivateDestinations(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	f := NewFetcher(FetcherConfig{})
	p := srv.port()
	for _, u := range []string{
		"http://127.0.0.1:" + p + "/ok?sig=" + secret,
		"http://[::1]:" + p + "/ok?sig=" + secret,
		"http://[::ffff:127.0.0.1]:" + p + "/ok?sig=" + secret,
		"http://169.254.169.254/latest/meta-data/?sig=" + secret,
		"http://localhost:" + p + "/ok?sig=" + secret,
		"http://user:" + secret + "@10.1.2.3:" + p + "/ok",
		"http://0.0.0.0:" + p + "/ok",
		"http://100.64.1.1:" + p + "/ok",
	} {
		t.Run(redact.URL(u), func(t *testing.T) {
			t.Parallel()
			_, _, err := fetchAll(context.Background(), f, u)
			checkSafe(t, err)
			if !errors.Is(err, ErrPrivateAddress) {
				t.Fatalf("Open(%s) = %v, want ErrPrivateAddress", redact.URL(u), err)
			}
			fe, ok := errors.AsType[*FetchError](err)
			if !ok || fe.Temporary() || IsTemporary(err) {
				t.Fatalf("Open(%s) = %#v, want a permanent *FetchError", redact.URL(u), err)
			}
		})
	}
	if n := srv.hits.Load(); n != 0 {
		t.Fatalf("server saw %d requests, want 0", n)
	}
}

func TestFetcherAllowPrivate(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	f := NewFetcher(FetcherConfig{AllowPrivate: true})
	for _, host := range []string{"127.0.0.1", "localhost"} {
		body, ct, err := fetchAll(context.Background(), f, "http://"+host+":"+srv.port()+"/ok")
		if err != nil || body != "hello" || ct != "text/plain" {
			t.Fatalf("fetch via %s = %q, %q, %v", host, body, ct, err)
		}
	}
	// IPv6 loopback, where the machine has it.
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Logf("no IPv6 loopback: %v", err)
		return
	}
	srv6 := &httptest.Server{Listener: ln, Config: &http.Server{Handler: srv.Config.Handler}}
	srv6.Start()
	defer srv6.Close()
	body, _, err := fetchAll(context.Background(), f, srv6.URL+"/ok")
	if err != nil || body != "hello" {
		t.Fatalf("fetch via [::1] = %q, %v", body, err)
	}
}

// loopbackOnly lets tests reach their loopback server while every other
// non-public address stays refused.
func loopbackOnly(a netip.Addr) bool { return a.Unmap().IsLoopback() || isPublic(a) }

func TestFetcherRedirectToPrivateAddress(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	f := newFetcher(FetcherConfig{}, loopbackOnly)
	for _, target := range []string{
		"http://10.255.0.1:9/internal?sig=" + secret,
		"http://169.254.169.254/latest/meta-data/?sig=" + secret,
		"http://[fd00::1]:9/?sig=" + secret,
	} {
		_, _, err := fetchAll(context.Background(), f, srv.URL+"/to?u="+url.QueryEscape(target))
		checkSafe(t, err)
		if !errors.Is(err, ErrPrivateAddress) {
			t.Fatalf("redirect to %s = %v, want ErrPrivateAddress", redact.URL(target), err)
		}
	}
}

func TestFetcherRedirectLimits(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	tests := []struct {
		name      string
		max       int
		redirects int
		wantErr   error
	}{
		{"FiveOfDefaultFive", 0, 5, nil},
		{"SixOfDefaultFive", 0, 6, ErrTooManyRedirects},
		{"OneOfOne", 1, 1, nil},
		{"TwoOfOne", 1, 2, ErrTooManyRedirects},
		{"OneOfNone", -1, 1, ErrTooManyRedirects},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := NewFetcher(FetcherConfig{AllowPrivate: true, MaxRedirects: tt.max})
			// /r/n makes n+1 redirects: n steps down and one to /ok.
			body, _, err := fetchAll(context.Background(), f, fmt.Sprintf("%s/r/%d?sig=%s", srv.URL, tt.redirects-1, secret))
			checkSafe(t, err)
			if !errors.Is(err, tt.wantErr) || (err == nil && body != "hello") {
				t.Fatalf("fetch = %q, %v; want error %v", body, err, tt.wantErr)
			}
			if err != nil && IsTemporary(err) {
				t.Fatalf("%v is temporary, want permanent", err)
			}
		})
	}
}

func TestFetcherSchemes(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	f := NewFetcher(FetcherConfig{AllowPrivate: true})
	for _, u := range []string{
		srv.URL + "/to?u=" + url.QueryEscape("file:///etc/passwd?sig="+secret),
		srv.URL + "/to?u=" + url.QueryEscape("gopher://example.test/?sig="+secret),
		"file:///etc/passwd",
		"ftp://example.test/x?sig=" + secret,
	} {
		_, _, err := fetchAll(context.Background(), f, u)
		checkSafe(t, err)
		if !errors.Is(err, ErrUnsupportedScheme) || IsTemporary(err) {
			t.Fatalf("Open(%s) = %v, want permanent ErrUnsupportedScheme", redact.URL(u), err)
		}
	}
	for _, u := range []string{"http:///nohost", "::not a url", ""} {
		if _, _, err := f.Open(context.Background(), u); err == nil || IsTemporary(err) {
			t.Fatalf("Open(%q) = %v, want a permanent error", u, err)
		}
	}
}

func TestFetcherMaxBytes(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	f := NewFetcher(FetcherConfig{AllowPrivate: true, MaxBytes: 10})
	t.Run("ContentLengthOverLimitFailsUpFront", func(t *testing.T) {
		t.Parallel()
		body, _, err := f.Open(context.Background(), srv.URL+"/bytes/11?sig="+secret)
		checkSafe(t, err)
		if body != nil || !errors.Is(err, ErrTooLarge) || IsTemporary(err) {
			t.Fatalf("Open = %v, %v; want permanent ErrTooLarge and no body", body, err)
		}
	})
	t.Run("BodyOverLimitFailsWhileReading", func(t *testing.T) {
		t.Parallel()
		got, _, err := fetchAll(context.Background(), f, srv.URL+"/chunked/11?sig="+secret)
		checkSafe(t, err)
		if !errors.Is(err, ErrTooLarge) || IsTemporary(err) {
			t.Fatalf("read = %q, %v; want permanent ErrTooLarge", got, err)
		}
		if len(got) > 10 {
			t.Fatalf("read %d bytes past a limit of 10", len(got))
		}
	})
	t.Run("AtLimitIsFine", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/bytes/10", "/chunked/10"} {
			got, _, err := fetchAll(context.Background(), f, srv.URL+path)
			if err != nil || len(got) != 10 {
				t.Fatalf("%s = %d bytes, %v", path, len(got), err)
			}
		}
	})
}

func TestFetcherStatus(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	f := NewFetcher(FetcherConfig{AllowPrivate: true})
	tests := []struct {
		code       int
		temporary  bool
		retryAfter time.Duration
	}{
		{404, false, 0},
		{403, false, 0},
		{400, false, 0},
		{429, true, 3 * time.Second},
		{503, true, 3 * time.Second},
		{500, true, 0},
		{502, true, 0},
	}
	for _, tt := range tests {
		_, _, err := f.Open(context.Background(), fmt.Sprintf("%s/status/%d?sig=%s", srv.URL, tt.code, secret))
		checkSafe(t, err)
		fe, ok := errors.AsType[*FetchError](err)
		if !ok || fe.Status != tt.code || fe.Temporary() != tt.temporary || IsTemporary(err) != tt.temporary || fe.RetryAfter != tt.retryAfter {
			t.Fatalf("status %d: got %#v", tt.code, err)
		}
		if want := srv.URL + "/status/" + strconv.Itoa(tt.code); fe.URL != want {
			t.Fatalf("FetchError.URL = %q, want %q", fe.URL, want)
		}
	}
}

func TestFetcherStalledBodyFails(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	f := NewFetcher(FetcherConfig{AllowPrivate: true, Timeout: 100 * time.Millisecond})
	_, _, err := fetchAll(context.Background(), f, srv.URL+"/stall?sig="+secret)
	checkSafe(t, err)
	if err == nil || !IsTemporary(err) {
		t.Fatalf("stalled body = %v, want a temporary error", err)
	}
}

func TestFetcherIgnoresEnvironmentProxy(t *testing.T) {
	t.Parallel()
	tr, ok := NewFetcher(FetcherConfig{}).client.Transport.(*http.Transport)
	if !ok || tr.Proxy != nil {
		t.Fatalf("transport %T has a proxy function", NewFetcher(FetcherConfig{}).client.Transport)
	}
}

func TestFetcherOpener(t *testing.T) {
	t.Parallel()
	srv := newFetchServer(t)
	f := NewFetcher(FetcherConfig{AllowPrivate: true})
	body, ct, source, err := f.Opener(srv.URL + "/ok?sig=" + secret)(context.Background())
	if err != nil {
		t.Fatalf("Opener: %v", err)
	}
	defer body.Close()
	if ct != "text/plain" || source != srv.URL+"/ok" {
		t.Fatalf("Opener = %q, %q; want text/plain and the scrubbed URL", ct, source)
	}
}
