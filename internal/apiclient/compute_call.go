package apiclient

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// This file is the compute client's one HTTP exchange: it picks the
// address, adds the token, runs one attempt, classifies the outcome and
// decides between returning, refreshing the token, failing over to the next
// address, retrying after a pause, and giving up (ambiguously for a paid
// submit).

// service selects which address list a request goes to.
type service int

const (
	svcBase  service = iota // {base_url}: token form, center
	svcAuth                 // the AK/SK token service (ComputeConfig.AuthURL)
	svcEfile                // {efile_url}: upload, download
	svcHPC                  // {hpc_url}: cluster, queues, submit, job
	svcAI                   // {ai_url}: containers
)

// callClass says what a repeat of the request may cost.
type callClass int

const (
	// classIdempotent calls (reads and the token call) are retried on
	// network errors, 429 and 5xx.
	classIdempotent callClass = iota
	// classSubmit creates a paid job: it is repeated only when the
	// platform certainly did not act (no connection, 429, 503, 401/403).
	classSubmit
	// classUpload re-opens its source for each attempt; ambiguous failures
	// are retried only when the request is repeatable (an upload that
	// overwrites, a chunk).
	classUpload
	// classMerge joins uploaded chunks: repeated only when the platform
	// certainly did not act; any other failure is the chunked upload's to
	// handle (it sends the chunks again).
	classMerge
)

// request describes one compute call.
type request struct {
	op       string // name in errors, e.g. "submit job"
	method   string
	svc      service
	auth     bool   // send the cluster token
	path     string // escaped path below the service address
	pathTmpl string // path for error messages when path holds user data
	query    url.Values
	header   http.Header
	jsonBody []byte
	form     url.Values  // application/x-www-form-urlencoded body
	upload   *uploadSpec // multipart body, streamed
	class    callClass
	stream   bool // keep the 2xx body open (download)
}

// result is what a successful exchange returns: the envelope data of a
// JSON call, or the open body of a stream.
type result struct {
	data json.RawMessage
	body *DownloadBody
}

// outcomeKind classifies one attempt.
type outcomeKind int

const (
	outOK        outcomeKind = iota
	outFatal                 // stop now: ctx done, source failed, bad request
	outNoConn                // transport failure before the request was sent (traceSent)
	outSent                  // transport failure after it may have been sent
	outStatus                // non-2xx answer
	outMalformed             // 2xx answer whose body could not be read or decoded
	outEnvelope              // 2xx answer with an error envelope
)

type outcome struct {
	kind outcomeKind
	err  error
	env  *EnvelopeError
}

// errAttemptTimeout is the cause set when an attempt outlives
// AttemptTimeout; errStalled when a body stopped moving for as long.
var (
	errAttemptTimeout = errors.New("attempt timeout")
	errStalled        = errors.New("transfer stalled")
)

// stallGuard cancels an attempt when one read or write of its body waits
// longer than d for a byte: the rule of artifacts' stallConn (a deadline
// before every read), applied to the body rather than the connection
// because the HTTP client may be the caller's. Time the caller spends
// between reads does not count: only a transfer that stopped moving.
type stallGuard struct {
	d      time.Duration
	cancel context.CancelCauseFunc
}

// during runs one read or write of a body under the guard.
func (g stallGuard) during(f func() (int, error)) (int, error) {
	t := time.AfterFunc(g.d, func() { g.cancel(errStalled) })
	defer t.Stop()
	return f()
}

// causeError replaces err by a timeoutError when cause says the attempt
// ran out of time or stalled.
func causeError(err, cause error, d time.Duration) error {
	switch {
	case errors.Is(cause, errStalled):
		return &timeoutError{d: d, stalled: true}
	case errors.Is(cause, errAttemptTimeout):
		return &timeoutError{d: d}
	}
	return err
}

// timeoutError reports an attempt that got no answer in time. It is a
// net.Error with Timeout true and matches context.DeadlineExceeded, so
// IsTransient treats it like any network timeout.
type timeoutError struct {
	d       time.Duration
	stalled bool // a body stopped moving (see stallGuard)
}

func (e *timeoutError) Error() string {
	if e.stalled {
		return fmt.Sprintf("transfer stalled: no byte moved for %s", e.d)
	}
	return fmt.Sprintf("no answer within %s", e.d)
}
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
func (e *timeoutError) Is(target error) bool {
	return target == context.DeadlineExceeded
}

// exchange runs rq until it succeeds or the rules of its class say stop. s
// is nil only for the token call.
func (c *Compute) exchange(ctx context.Context, s *ClusterSession, rq *request) (*result, error) {
	var (
		attempt   int  // failed attempts that count against MaxAttempts
		hops      int  // addresses tried in this round without a connection
		refreshed bool // the token was refreshed once for this call
		tok       *tokenState
		lastErr   error
	)
	for {
		if err := ctx.Err(); err != nil {
			return nil, c.wrap(rq, err)
		}
		if rq.auth && tok == nil {
			t, err := c.token(ctx, s.clusterID)
			if err != nil {
				return nil, err
			}
			tok = t
		}
		var urls *serviceURLs
		if s != nil {
			urls = s.service(rq.svc)
		}
		base, idx := c.base, 0
		if rq.svc == svcAuth {
			base = c.auth
		}
		if urls != nil {
			idx = int(urls.pref.Load()) % len(urls.urls)
			base = urls.get(idx)
		}
		res, o := c.attempt(ctx, rq, base, tok)
		var retryAfter time.Duration
		switch o.kind {
		case outOK:
			if tok != nil {
				tok.worked.Store(true)
			}
			return res, nil
		case outFatal:
			return nil, c.wrap(rq, o.err)
		case outNoConn:
			lastErr = o.err
			if urls != nil && hops < len(urls.urls)-1 {
				hops++
				urls.pref.CompareAndSwap(int32(idx), int32((idx+1)%len(urls.urls)))
				continue
			}
			hops = 0
		case outSent:
			lastErr = o.err
			switch {
			case rq.class == classSubmit:
				return nil, c.ambiguous(rq, o.err)
			case !rq.repeatable(), ctx.Err() != nil:
				return nil, c.wrap(rq, o.err)
			}
		case outStatus:
			env := o.env
			lastErr = env
			switch {
			case env.authRejected() && rq.auth && !refreshed:
				refreshed = true
				fresh, err := c.refresh(ctx, s.clusterID, tok, false)
				if err != nil {
					return nil, fmt.Errorf("apiclient: compute %s: token rejected (HTTP %d) and refresh failed: %w", rq.op, env.Status, err)
				}
				tok = fresh
				continue
			case env.authRejected() && refreshed:
				return nil, fmt.Errorf("%w (after one token refresh)", env)
			case env.certainlyRejected():
				retryAfter = env.RetryAfter
			case env.Status >= 500 && rq.class == classSubmit:
				return nil, c.ambiguous(rq, env)
			case env.Status >= 500 && !rq.repeatable():
				return nil, env
			case env.Status >= 500:
			default:
				return nil, env
			}
		case outMalformed:
			lastErr = o.err
			switch {
			case rq.class == classSubmit:
				return nil, c.ambiguous(rq, o.err)
			case !rq.repeatable():
				return nil, c.wrap(rq, o.err)
			}
		case outEnvelope:
			env := o.env
			if rq.class == classSubmit {
				fresh, err := c.paidEnvelope(ctx, s, rq, tok, env, refreshed)
				if fresh == nil {
					return nil, err
				}
				refreshed, tok = true, fresh
				continue
			}
			if rq.auth && !refreshed && !env.aboutTheThing() && tok.expiryPossible(c.cfg.Now()) {
				// The token worked before: the error may be its expiry.
				// A refresh that hands back the same token says it was not.
				refreshed = true
				fresh, err := c.refresh(ctx, s.clusterID, tok, false)
				if err != nil {
					return nil, fmt.Errorf("apiclient: compute %s: error envelope (code %s) and token refresh failed: %w", rq.op, env.Code, err)
				}
				if fresh.entry.Token != tok.entry.Token {
					tok = fresh
					continue
				}
			}
			return nil, env
		}

		attempt++
		if attempt >= c.cfg.MaxAttempts {
			if _, ok := errors.AsType[*EnvelopeError](lastErr); ok {
				return nil, fmt.Errorf("%w (after %d attempts)", lastErr, attempt)
			}
			return nil, fmt.Errorf("apiclient: compute %s: %w (after %d attempts)", rq.op, lastErr, attempt)
		}
		delay := c.cfg.Backoff.Delay(attempt - 1)
		if retryAfter > maxRetryAfterWait {
			return nil, c.wrap(rq, lastErr)
		}
		if retryAfter > 0 {
			delay = retryAfter
		}
		if err := c.cfg.Sleep(ctx, delay); err != nil {
			return nil, c.wrap(rq, err)
		}
	}
}

// paidEnvelope judges an error envelope answered to a paid call. Only an
// answer that says the token was refused proves the platform did not act:
// the fresh token is returned, and the call is sent again once with it. A
// busy answer (10001) may come after the platform acted, so it is
// ambiguous; any other envelope is the platform's refusal.
func (c *Compute) paidEnvelope(ctx context.Context, s *ClusterSession, rq *request, tok *tokenState, env *EnvelopeError, refreshed bool) (*tokenState, error) {
	switch {
	case env.saysTokenRejected() && rq.auth && !refreshed:
		fresh, err := c.refresh(ctx, s.clusterID, tok, false)
		if err != nil {
			return nil, fmt.Errorf("apiclient: compute %s: token refused (code %s) and refresh failed: %w", rq.op, env.Code, err)
		}
		return fresh, nil
	case env.busy():
		return nil, c.ambiguous(rq, env)
	}
	return nil, env
}

// repeatable reports whether repeating rq after an ambiguous failure is
// harmless. A submit's ambiguity is handled before (ErrAmbiguous).
func (rq *request) repeatable() bool {
	switch rq.class {
	case classUpload:
		return rq.upload.repeatable
	case classMerge:
		return false
	}
	return true
}

// service returns the address list of svc, nil for the base URL.
func (s *ClusterSession) service(svc service) *serviceURLs {
	switch svc {
	case svcEfile:
		return s.efile
	case svcHPC:
		return s.hpc
	case svcAI:
		return s.ai
	}
	return nil
}

// wrap names the call in err unless err already does.
func (c *Compute) wrap(rq *request, err error) error {
	if _, ok := errors.AsType[*EnvelopeError](err); ok {
		return err
	}
	return fmt.Errorf("apiclient: compute %s: %w", rq.op, err)
}

// ambiguous marks a failed paid call whose effect is unknown.
func (c *Compute) ambiguous(rq *request, err error) error {
	return fmt.Errorf("apiclient: compute %s: %w: %w", rq.op, ErrAmbiguous, err)
}

// attempt sends rq once to base.
func (c *Compute) attempt(ctx context.Context, rq *request, base *url.URL, tok *tokenState) (*result, outcome) {
	actx, cancel := context.WithCancelCause(ctx)
	keepCtx := false
	defer func() {
		if !keepCtx {
			cancel(nil)
		}
	}()
	var timer atomic.Pointer[time.Timer]
	arm := func() {
		timer.Store(time.AfterFunc(c.cfg.AttemptTimeout, func() { cancel(errAttemptTimeout) }))
	}
	defer func() {
		if t := timer.Load(); t != nil {
			t.Stop()
		}
	}()
	guard := stallGuard{d: c.cfg.AttemptTimeout, cancel: cancel}
	if rq.upload == nil {
		arm() // uploads arm it once their last byte is sent; the guard watches them until then
	}

	// sent is the clients' one rule for "may upstream have seen it"
	// (see traceSent).
	actx, sent := traceSent(actx)

	target := base.String() + rq.path
	if len(rq.query) > 0 {
		target += "?" + rq.query.Encode()
	}
	var (
		body        io.Reader
		contentType = "application/json"
		up          *uploadRun
	)
	switch {
	case rq.upload != nil:
		var err error
		up, err = rq.upload.start(arm, guard)
		if err != nil {
			return nil, outcome{kind: outFatal, err: err}
		}
		body, contentType = up.body, up.contentType
	case rq.jsonBody != nil:
		body = bytes.NewReader(rq.jsonBody)
	case rq.form != nil:
		body, contentType = strings.NewReader(rq.form.Encode()), "application/x-www-form-urlencoded"
	}
	req, err := http.NewRequestWithContext(actx, rq.method, target, body)
	if err != nil {
		if up != nil {
			_ = up.finish()
		}
		return nil, outcome{kind: outFatal, err: fmt.Errorf("build request: %w", ErrInvalidArgument)}
	}
	for k, v := range rq.header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", contentType)
	if tok != nil {
		req.Header.Set("token", tok.entry.Token)
	}

	resp, err := c.cfg.HTTPClient.Do(req)
	if up != nil {
		if srcErr := up.finish(); srcErr != nil {
			if resp != nil {
				backoff.DrainClose(resp.Body)
			}
			return nil, outcome{kind: outFatal, err: srcErr}
		}
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The caller gave up; if a connection was made the request
			// may have arrived, which matters for a paid submit.
			if sent() {
				return nil, outcome{kind: outSent, err: ctxErr}
			}
			return nil, outcome{kind: outFatal, err: ctxErr}
		}
		err = c.transportError(rq, base, err, context.Cause(actx))
		if !sent() {
			return nil, outcome{kind: outNoConn, err: err}
		}
		return nil, outcome{kind: outSent, err: err}
	}

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := readBody(resp)
		return nil, outcome{kind: outStatus, env: c.envelopeError(rq, resp.StatusCode, resp.Header, b)}
	}

	if rq.stream {
		if t := timer.Load(); t != nil {
			t.Stop()
		}
		res, o := c.openStream(rq, resp, actx, guard)
		if o.kind == outOK {
			keepCtx = true
		}
		return res, o
	}

	b, err := readBody(resp)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, outcome{kind: outSent, err: ctxErr}
		}
		return nil, outcome{kind: outMalformed, err: fmt.Errorf("%w: %w", ErrMalformedResponse, c.transportError(rq, base, err, context.Cause(actx)))}
	}
	var env Envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, outcome{kind: outMalformed, err: fmt.Errorf("%w: body is not an envelope: %w", ErrMalformedResponse, err)}
	}
	if env.Code == "" {
		return nil, outcome{kind: outMalformed, err: fmt.Errorf("%w: envelope has no code", ErrMalformedResponse)}
	}
	if env.Code != "0" {
		return nil, outcome{kind: outEnvelope, env: &EnvelopeError{
			Op: rq.op, Status: resp.StatusCode, Code: scrub(env.Code, c.secrets()...), Msg: scrub(env.Msg, c.secrets()...),
		}}
	}
	return &result{data: env.Data}, outcome{kind: outOK}
}

// envelopeError builds the error of a non-2xx answer from whatever body it
// had.
func (c *Compute) envelopeError(rq *request, status int, h http.Header, body []byte) *EnvelopeError {
	e := &EnvelopeError{Op: rq.op, Status: status}
	if d, ok := backoff.RetryAfter(h, c.cfg.Now()); ok {
		e.RetryAfter = d
	}
	var env Envelope
	if err := json.Unmarshal(body, &env); err == nil && env.Code != "" {
		e.Code = scrub(env.Code, c.secrets()...)
		e.Msg = scrub(env.Msg, c.secrets()...)
		return e
	}
	e.Msg = scrub(string(body), c.secrets()...)
	if e.Msg == "" {
		e.Msg = http.StatusText(status)
	}
	return e
}

// transportError replaces the URL of a *url.Error (which may hold a user
// name or a file path) by the address and the path template, and reports
// an attempt timeout as such.
func (c *Compute) transportError(rq *request, base *url.URL, err error, cause error) error {
	if te := causeError(nil, cause, c.cfg.AttemptTimeout); te != nil {
		err = te
	} else if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	p := cmp.Or(rq.pathTmpl, rq.path)
	return &url.Error{Op: urlOp(rq.method), URL: base.Scheme + "://" + base.Host + p, Err: err}
}

func urlOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// maxEnvelopePeek is how much of a download answered as application/json
// is read to tell an error envelope from file content.
const maxEnvelopePeek = 64 << 10

// openStream turns a 2xx download answer into a DownloadBody, unless it is
// an error envelope (Content-Type application/json with a code other than
// "0").
func (c *Compute) openStream(rq *request, resp *http.Response, actx context.Context, guard stallGuard) (*result, outcome) {
	var prefix []byte
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "application/json" {
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxEnvelopePeek+1))
		if err != nil {
			backoff.DrainClose(resp.Body)
			return nil, outcome{kind: outSent, err: fmt.Errorf("read download: %w", err)}
		}
		if len(b) <= maxEnvelopePeek {
			var env Envelope
			if json.Unmarshal(b, &env) == nil && env.Code != "" && env.Code != "0" {
				backoff.DrainClose(resp.Body)
				return nil, outcome{kind: outEnvelope, env: &EnvelopeError{
					Op: rq.op, Status: resp.StatusCode, Code: scrub(env.Code, c.secrets()...), Msg: scrub(env.Msg, c.secrets()...),
				}}
			}
		}
		prefix = b
	}
	size := resp.ContentLength
	return &result{body: &DownloadBody{
		r:     io.MultiReader(bytes.NewReader(prefix), resp.Body),
		body:  resp.Body,
		ctx:   actx,
		guard: guard,
		size:  size,
	}}, outcome{kind: outOK}
}
