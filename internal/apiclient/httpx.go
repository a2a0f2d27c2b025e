package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// MaxResponseBytes bounds every JSON response body read by the clients.
// Artifact downloads are streams and are not subject to it.
const MaxResponseBytes = 8 << 20

// ErrResponseTooLarge is returned when a JSON response exceeds
// MaxResponseBytes.
var ErrResponseTooLarge = errors.New("apiclient: response body too large")

// readBody reads at most MaxResponseBytes of resp's body and always drains
// and closes it, so the connection can be reused.
func readBody(resp *http.Response) ([]byte, error) {
	defer backoff.DrainClose(resp.Body)
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	if len(b) > MaxResponseBytes {
		return nil, ErrResponseTooLarge
	}
	return b, nil
}

// ParseBaseURL checks the {base_url} of an upstream API and returns it
// parsed, without trailing slashes on its path. The rule is the same for
// both clients and for the worker's configuration: http or https, a host,
// an optional path prefix, and no user information (credentials have their
// own settings), query or fragment (the clients append paths and queries
// of their own). The error states the broken rule and never repeats the
// address, which may hold a credential.
func ParseBaseURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, errors.New("is required")
	}
	if !strings.Contains(s, "://") {
		// host:port is the likely slip; url.Parse would call it "not a
		// valid URL" or read the host as a scheme.
		return nil, errors.New("has no scheme: want a URL such as http://127.0.0.1:7070 or https://host, not host:port")
	}
	u, err := url.Parse(s)
	if err != nil {
		// url.Parse echoes its input.
		return nil, errors.New("is not a valid URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an http or https URL")
	case u.Host == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry credentials")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, errors.New("must not have a query")
	case u.Fragment != "" || u.RawFragment != "":
		return nil, errors.New("must not have a fragment")
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return u, nil
}

// traceSent returns ctx with a trace that records whether the request
// made with it may have reached upstream, and the function that reports
// it. Both clients decide with it whether a failed request can be sent
// again, so there is one rule for "was the request sent":
//
// A request may have been sent once the transport holds a connection for
// it (httptrace GotConn). Before that (DNS, dial, TLS handshake, proxy)
// nothing can have reached upstream: a failed paid call is repeated, and
// the compute client moves on to its next address. From then on a failed
// paid call is ambiguous and is never repeated, and no other address is
// tried. A connection comes before the first byte of the request, so the
// rule errs on the side of "sent": it may call an unsent request
// ambiguous, never a sent one unsent.
func traceSent(ctx context.Context) (context.Context, func() bool) {
	var conn atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { conn.Store(true) },
	})
	return ctx, conn.Load
}
