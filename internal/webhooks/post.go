package webhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/contract"
)

// maxAnswer is how much of a receiver's answer is read; the rest is not
// waited for.
const maxAnswer = 64 << 10

// answer is a receiver's answer to one POST.
type answer struct {
	status     int
	retryAfter time.Duration
	err        error
}

// clients are the HTTP clients of deliveries, one for https and one for
// plain http, whose dialers differ (URLPolicy.dialer).
type clients struct{ tls, plain *http.Client }

func newClients(p URLPolicy, timeout time.Duration) clients {
	return clients{tls: newClient(p, timeout, false), plain: newClient(p, timeout, true)}
}

// newClient returns an HTTP client of deliveries: no environment proxy,
// the policy's dialer, no redirect followed (a 3xx is a failure), timeout
// for the whole exchange.
func newClient(p URLPolicy, timeout time.Duration, plain bool) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy: nil, DialContext: p.dialer(plain).DialContext,
			TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// post sends one signed delivery. The signature and secrets never reach
// an error.
func post(ctx context.Context, cs clients, url string, secrets []string, id string, body []byte, now time.Time) answer {
	ts := now.Unix()
	sig, err := Signature(secrets, id, ts, body)
	if err != nil {
		return answer{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{err: errors.New("cannot build the request: not a valid URL")}
	}
	req.Header.Set("Content-Type", contract.CloudEventsContentType)
	req.Header.Set("User-Agent", "sluice-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	c := cs.tls
	if req.URL.Scheme == "http" {
		c = cs.plain
	}
	resp, err := c.Do(req)
	if err != nil {
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) {
			err = ue.Unwrap() // drop the URL, which may carry a token
		}
		return answer{err: err}
	}
	// Read a little of the answer so the connection can be reused, but
	// never wait for a large one.
	_, _ = io.CopyN(io.Discard, resp.Body, maxAnswer)
	_ = resp.Body.Close()
	a := answer{status: resp.StatusCode}
	if d, ok := backoff.RetryAfter(resp.Header, now); ok {
		a.retryAfter = d
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a.err = fmt.Errorf("receiver answered %s", resp.Status)
	}
	return a
}
