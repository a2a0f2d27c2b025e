package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// mediaCall is one logical media API call, possibly sent several times.
type mediaCall struct {
	op     string            // names the call in errors, e.g. "submit video"
	method string            // HTTP method
	path   string            // escaped path under the base URL
	body   []byte            // JSON body; nil for none
	header map[string]string // extra headers
	// paid marks a call that creates a billed upstream resource. It is
	// repeated only when upstream certainly created nothing.
	paid bool
	// decode parses a 2xx body. Its failure is retried on an idempotent
	// call and ambiguous on a paid one. Nil for a stream.
	decode func([]byte) error
	// stream returns the 2xx response with its body unread (decode unused).
	stream bool
}

// mediaVerdict is what one try of a call came to.
type mediaVerdict struct {
	resp  *http.Response // open 2xx response of a stream call
	stop  func()         // releases resp's attempt context
	err   error          // the try's error, nil on success
	retry bool           // the call may be sent again
	wait  time.Duration  // Retry-After asked for by upstream, 0 if none
}

// do runs cl, retrying as its class allows, and returns nil once cl.decode
// accepted a 2xx body.
func (c *Media) do(ctx context.Context, cl mediaCall) error {
	_, _, err := c.run(ctx, cl)
	return err
}

// doStream runs a stream call and returns the open 2xx response and the
// function that releases it (after the body is closed).
func (c *Media) doStream(ctx context.Context, cl mediaCall) (*http.Response, func(), error) {
	cl.stream = true
	return c.run(ctx, cl)
}

func (c *Media) run(ctx context.Context, cl mediaCall) (*http.Response, func(), error) {
	for attempt := 1; ; attempt++ {
		v := c.try(ctx, cl)
		if v.err == nil {
			return v.resp, v.stop, nil
		}
		if !v.retry {
			return nil, nil, fmt.Errorf("%s: %w", cl.op, v.err)
		}
		if attempt >= c.cfg.MaxAttempts {
			return nil, nil, fmt.Errorf("%s: giving up after %d attempts: %w", cl.op, attempt, v.err)
		}
		wait := min(v.wait, maxRetryAfter)
		if wait <= 0 {
			wait = c.cfg.Backoff.Delay(attempt - 1)
		}
		if err := c.cfg.Sleep(ctx, wait); err != nil {
			return nil, nil, fmt.Errorf("%s: stopped retrying (%w) after: %w", cl.op, err, v.err)
		}
	}
}

// try sends cl once and classifies the outcome.
func (c *Media) try(ctx context.Context, cl mediaCall) mediaVerdict {
	if err := ctx.Err(); err != nil {
		return mediaVerdict{err: err}
	}
	var actx context.Context
	var cancel context.CancelFunc
	var timer *time.Timer
	if cl.stream {
		// The attempt timeout covers the headers only: the body of a
		// stream lives as long as the caller's ctx.
		actx, cancel = context.WithCancel(ctx)
		timer = time.AfterFunc(c.cfg.AttemptTimeout, cancel)
	} else {
		actx, cancel = context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	}
	release := func() {
		if timer != nil {
			timer.Stop()
		}
		cancel()
	}

	// sent is the clients' one rule for "may upstream have seen it"
	// (see traceSent).
	actx, sent := traceSent(actx)
	req, err := c.newRequest(actx, cl)
	if err != nil {
		release()
		return mediaVerdict{err: err}
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if timer != nil && !timer.Stop() && err != nil {
		err = fmt.Errorf("no response headers within %s: %w", c.cfg.AttemptTimeout, err)
	}
	if err != nil {
		release()
		if ctx.Err() != nil {
			// The caller gave up; say so, but a paid request that left
			// may still have been acted on.
			if cl.paid && sent() {
				return mediaVerdict{err: fmt.Errorf("%w: request sent, then %w", ErrAmbiguous, ctx.Err())}
			}
			return mediaVerdict{err: ctx.Err()}
		}
		if cl.paid && sent() {
			return mediaVerdict{err: fmt.Errorf("%w: request sent, then: %w", ErrAmbiguous, err)}
		}
		return mediaVerdict{err: err, retry: true}
	}

	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if cl.stream {
			return mediaVerdict{resp: resp, stop: release}
		}
		defer release()
		body, err := readBody(resp)
		if err == nil {
			err = cl.decode(body)
		}
		if err == nil {
			return mediaVerdict{}
		}
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		err = fmt.Errorf("%w: %s: %w", ErrMalformedResponse, mediaStatus(resp.StatusCode), err)
		if cl.paid {
			return mediaVerdict{err: fmt.Errorf("%w: %w", ErrAmbiguous, err)}
		}
		return mediaVerdict{err: err, retry: ctx.Err() == nil}
	}

	defer release()
	body, _ := readBody(resp) // an unreadable error body still has its status
	apiErr := newAPIError(resp.StatusCode, resp.Header, body, c.cfg.Now(), c.cfg.APIKey)
	switch {
	case backoff.RefusedStatus(resp.StatusCode):
		// Upstream refused before doing anything: safe for every class.
		return mediaVerdict{err: apiErr, retry: true, wait: apiErr.RetryAfter}
	case resp.StatusCode >= 500:
		if cl.paid {
			return mediaVerdict{err: fmt.Errorf("%w: %w", ErrAmbiguous, apiErr)}
		}
		return mediaVerdict{err: apiErr, retry: true, wait: apiErr.RetryAfter}
	default:
		return mediaVerdict{err: apiErr}
	}
}

func (c *Media) newRequest(ctx context.Context, cl mediaCall) (*http.Request, error) {
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, c.base+cl.path, body)
	if err != nil {
		// The URL holds no secret (validated base, escaped path), but the
		// message is ours alone to be safe.
		return nil, fmt.Errorf("%w: cannot build request for %s", ErrInvalidArgument, cl.path)
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	req.Header.Set("Content-Type", "application/json")
	if cl.stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	for k, v := range cl.header {
		req.Header.Set(k, v)
	}
	return req, nil
}

// mediaBody encodes a request body. Errors never echo the value: request
// bodies may hold presigned URLs.
func mediaBody(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: request body cannot be encoded as JSON", ErrInvalidArgument)
	}
	return b, nil
}

func mediaStatus(code int) string { return fmt.Sprintf("HTTP %d", code) }
