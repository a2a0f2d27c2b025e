package artifacts

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/redact"
)

// FetcherConfig configures a Fetcher. The zero value is usable.
type FetcherConfig struct {
	// AllowPrivate allows downloads from loopback, private, link-local and
	// other non-public addresses (development and tests only). Defaults to
	// false.
	AllowPrivate bool
	// MaxBytes is the largest body a download may have; a larger one fails
	// with ErrTooLarge. Defaults to 5 GiB.
	MaxBytes int64
	// MaxRedirects is how many redirects a download follows. Defaults to
	// 5; a negative value follows none.
	MaxRedirects int
	// Timeout bounds the wait for response headers and for each read of
	// the body to make progress; the whole download has no deadline of its
	// own (the caller's context has). Defaults to 60s.
	Timeout time.Duration
	// Now reads the clock for Retry-After dates. Defaults to time.Now.
	Now func() time.Time
}

// withDefaults fills the unset fields.
func (c FetcherConfig) withDefaults() FetcherConfig {
	c.MaxBytes = cmp.Or(c.MaxBytes, DefaultMaxBytes)
	c.MaxRedirects = cmp.Or(c.MaxRedirects, 5)
	c.MaxRedirects = max(c.MaxRedirects, 0)
	c.Timeout = cmp.Or(c.Timeout, 60*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// DefaultMaxBytes is the default size limit of an artifact: 5 GiB, which is
// also the contract's default SLUICE_MAX_ARTIFACT_BYTES.
const DefaultMaxBytes int64 = 5 << 30

// Fetcher downloads artifacts over HTTP(S) for streaming into S3. It never
// uses an environment proxy, refuses non-public destinations at dial time
// unless AllowPrivate, follows only http and https redirects and a bounded
// number of them, and never puts a URL query string into an error. It is
// safe for concurrent use.
type Fetcher struct {
	cfg    FetcherConfig
	client *http.Client
}

// NewFetcher returns a Fetcher with its own HTTP transport.
func NewFetcher(cfg FetcherConfig) *Fetcher {
	return newFetcher(cfg, isPublic)
}

// newFetcher is NewFetcher with the address policy used unless
// AllowPrivate.
func newFetcher(cfg FetcherConfig, allowed func(netip.Addr) bool) *Fetcher {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = dialGuard(allowed)
	}
	stall := cfg.Timeout
	transport := &http.Transport{
		Proxy: nil, // never an environment proxy: it would hide the destination from the guard
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &stallConn{Conn: c, timeout: stall}, nil
		},
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: cfg.Timeout,
		ExpectContinueTimeout: time.Second,
		// Results usually come from one host, and a worker copies up to
		// 16 at once (4 × SLUICE_COPY_CONCURRENCY at its default): with
		// fewer idle connections kept per host, every download past them
		// dialed a connection and closed it after its body.
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     90 * time.Second,
	}
	f := &Fetcher{cfg: cfg}
	f.client = &http.Client{Transport: transport, CheckRedirect: f.checkRedirect}
	return f
}

// checkRedirect bounds redirects and refuses a change to a scheme other
// than http or https (file://, gopher://, ...).
func (f *Fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.cfg.MaxRedirects {
		return fmt.Errorf("%w: more than %d", ErrTooManyRedirects, f.cfg.MaxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirect to %q", ErrUnsupportedScheme, req.URL.Scheme)
	}
	return nil
}

// Open starts a download of rawURL and returns its body, limited to
// MaxBytes, and the Content-Type the server gave. The caller closes body.
// Every error is a *FetchError (with a scrubbed URL); it matches
// ErrTooLarge when Content-Length announces more than MaxBytes or the body
// grows past it, ErrPrivateAddress, ErrUnsupportedScheme or
// ErrTooManyRedirects when the destination is refused. Read errors of the
// body are *FetchError too.
func (f *Fetcher) Open(ctx context.Context, rawURL string) (body io.ReadCloser, contentType string, err error) {
	scrubbed := redact.URL(rawURL)
	fail := func(status int, err error) error {
		return &FetchError{Status: status, URL: scrubbed, Err: scrubErr(err)}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, "", fail(0, fmt.Errorf("%w: url: not a valid URL", ErrInvalidArgument))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", fail(0, fmt.Errorf("%w: %q", ErrUnsupportedScheme, u.Scheme))
	}
	if u.Host == "" {
		return nil, "", fail(0, fmt.Errorf("%w: url: no host", ErrInvalidArgument))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, "", fail(0, fmt.Errorf("%w: url: %v", ErrInvalidArgument, scrubErr(err)))
	}
	req.Header.Set("Accept", "*/*")
	resp, err := f.client.Do(req)
	if err != nil {
		// A *url.Error quotes the full URL, query included: keep only its
		// cause.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, "", fail(0, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		backoff.DrainClose(resp.Body)
		fe := &FetchError{Status: resp.StatusCode, URL: scrubbed}
		if backoff.RefusedStatus(resp.StatusCode) {
			fe.RetryAfter, _ = backoff.RetryAfter(resp.Header, f.cfg.Now())
		}
		return nil, "", fe
	}
	if resp.ContentLength > f.cfg.MaxBytes {
		backoff.DrainClose(resp.Body)
		return nil, "", fail(resp.StatusCode, fmt.Errorf("%w: Content-Length %d exceeds %d bytes", ErrTooLarge, resp.ContentLength, f.cfg.MaxBytes))
	}
	return &fetchBody{
		body:   resp.Body,
		limit:  f.cfg.MaxBytes,
		size:   resp.ContentLength,
		framed: framed(resp),
		status: resp.StatusCode,
		url:    scrubbed,
	}, resp.Header.Get("Content-Type"), nil
}

// Opener returns an OpenFunc that downloads rawURL afresh on each call;
// the Source it reports is the scrubbed URL.
func (f *Fetcher) Opener(rawURL string) OpenFunc {
	return func(ctx context.Context) (io.ReadCloser, string, string, error) {
		body, ct, err := f.Open(ctx, rawURL)
		if err != nil {
			return nil, "", "", err
		}
		return body, ct, redact.URL(rawURL), nil
	}
}

// framed reports whether resp's body shows its own end when it has no
// Content-Length: chunked framing, an HTTP/2 stream, or a compressed
// stream that net/http decodes. Without any of these the body ends where
// the connection closes, and a connection closed before the first byte
// looks like an empty file.
func framed(resp *http.Response) bool {
	return resp.ContentLength >= 0 || resp.ProtoMajor >= 2 || resp.Uncompressed ||
		slices.Contains(resp.TransferEncoding, "chunked")
}

// fetchBody is a download's body: it fails with ErrTooLarge past the limit,
// with ErrShortBody when it ends empty and nothing framed it (see framed),
// and turns read errors into *FetchError. A body shorter than its
// Content-Length fails in net/http already (io.ErrUnexpectedEOF), and Put
// checks the length again (Size).
type fetchBody struct {
	body   io.ReadCloser
	limit  int64
	n      int64
	size   int64 // Content-Length, -1 when unknown
	framed bool
	status int
	url    string
}

// Size returns the Content-Length the server announced, -1 when unknown.
func (b *fetchBody) Size() int64 { return b.size }

func (b *fetchBody) Read(p []byte) (int, error) {
	if b.n > b.limit {
		return 0, b.tooLarge()
	}
	if rest := b.limit - b.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.body.Read(p)
	b.n += int64(n)
	if b.n > b.limit {
		return n - int(b.n-b.limit), b.tooLarge()
	}
	switch {
	case err == io.EOF && b.n == 0 && !b.framed:
		err = &FetchError{Status: b.status, URL: b.url, Err: fmt.Errorf("%w: the connection closed before any byte, and no length or framing says the file is empty", ErrShortBody)}
	case err != nil && err != io.EOF:
		err = &FetchError{Status: b.status, URL: b.url, Err: scrubErr(err)}
	}
	return n, err
}

func (b *fetchBody) tooLarge() error {
	return &FetchError{Status: b.status, URL: b.url, Err: fmt.Errorf("%w: body exceeds %d bytes", ErrTooLarge, b.limit)}
}

// Close closes the underlying body.
func (b *fetchBody) Close() error { return b.body.Close() }

// stallConn sets a read deadline before every read, so a server that stops
// sending in the middle of a body is noticed after the timeout.
type stallConn struct {
	net.Conn
	timeout time.Duration
}

func (c *stallConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}
