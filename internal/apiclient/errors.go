package apiclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/redact"
)

// Sentinel errors shared by the upstream clients. Match them with errors.Is;
// an *APIError matches the ones that describe its status or code.
var (
	// ErrAmbiguous marks a failure of a non-idempotent call (a paid submit)
	// after which upstream may or may not have acted: a timeout or reset
	// after the request was written, a 5xx other than 503, or a 2xx whose
	// body could not be read or decoded. The underlying cause stays wrapped.
	// An ambiguous error is neither transient nor permanent: repeating the
	// call could pay twice, so the caller must reconcile or give up.
	ErrAmbiguous = errors.New("apiclient: outcome unknown, upstream may have acted")

	// ErrTaskTerminal is matched by an *APIError telling that a task is
	// already succeeded, failed or cancelled (invalid_task_status).
	ErrTaskTerminal = errors.New("apiclient: task already in a terminal status")

	// ErrTaskNotFound is matched by an *APIError with HTTP status 404 from a
	// task endpoint: upstream does not know the id.
	ErrTaskNotFound = errors.New("apiclient: task not found")

	// ErrUnauthorized is matched by an *APIError with HTTP status 401 or
	// 403: upstream rejected the credentials.
	ErrUnauthorized = errors.New("apiclient: credentials rejected")

	// ErrQuotaExhausted is matched by an *APIError with HTTP status 433,
	// the media API's answer to a submit over the account's quota (one
	// run per model per day; platform-evidence.md section 6): nothing was
	// created. It is neither transient (asked again within seconds, the
	// answer is the same) nor permanent (the quota comes back): the
	// caller retries after minutes, within a bound of its own.
	ErrQuotaExhausted = errors.New("apiclient: upstream quota exhausted")

	// ErrConcurrencyConflict is matched by an *APIError with HTTP status
	// 433 whose code is 10007 or whose message speaks of concurrency: the
	// media API's answer to a submit over the account's limit of tasks at
	// once (platform-evidence.md section 6). Nothing was created and the
	// limit frees as tasks end: the caller retries within seconds and
	// sends fewer at once. Such an answer does not match ErrQuotaExhausted.
	ErrConcurrencyConflict = errors.New("apiclient: upstream concurrency conflict")

	// ErrMalformedResponse marks a response body that was truncated or did
	// not have the documented shape.
	ErrMalformedResponse = errors.New("apiclient: malformed response")

	// ErrStreamIncomplete marks a stream that ended, or broke, before its
	// final frame. Errors carrying it also match ErrAmbiguous: the stream
	// was a paid submission that upstream has already started.
	ErrStreamIncomplete = errors.New("apiclient: stream ended without a final frame")

	// ErrInvalidArgument marks a call refused by the client before anything
	// was sent (bad configuration, empty id, too many ids). The message
	// names the field.
	ErrInvalidArgument = errors.New("apiclient: invalid argument")
)

// APIError is an error answer of an upstream API: any non-2xx HTTP status.
// When the body has the documented error shape its fields are copied;
// otherwise Message is a short, scrubbed excerpt of the body. Strings are
// scrubbed of credentials and URL query strings before they are stored.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Type is error.type, e.g. "invalid_request_error".
	Type string
	// Code is error.code, e.g. "invalid_parameter".
	Code string
	// Param is error.param, the offending field, when upstream named one.
	Param string
	// Message is error.message, or a short excerpt of an undocumented body.
	Message string
	// RequestID is the request_id upstream gave the failed call.
	RequestID string
	// RetryAfter is the parsed Retry-After header of the answer; zero when
	// absent, unparseable or zero.
	RetryAfter time.Duration
}

// Error returns a one-line description naming the status, type, code and
// param; it never contains a credential.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiclient: upstream answered HTTP %d", e.Status)
	if e.Type != "" {
		b.WriteString(" " + e.Type)
	}
	if e.Code != "" {
		b.WriteString(" (code " + e.Code + ")")
	}
	if e.Param != "" {
		b.WriteString(" param " + e.Param)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.RequestID != "" {
		b.WriteString(" [request_id " + e.RequestID + "]")
	}
	return b.String()
}

// Is reports whether e is described by target: ErrTaskTerminal for
// invalid_task_status, ErrTaskNotFound for 404, ErrUnauthorized for 401 and
// 403, ErrConcurrencyConflict for a 433 that speaks of concurrency and
// ErrQuotaExhausted for any other 433.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrTaskTerminal:
		return e.Type == "invalid_task_status" || e.Code == "invalid_task_status"
	case ErrTaskNotFound:
		return e.Status == http.StatusNotFound
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrQuotaExhausted:
		return e.Status == StatusQuotaExhausted && !e.concurrency()
	case ErrConcurrencyConflict:
		return e.Status == StatusQuotaExhausted && e.concurrency()
	}
	return false
}

// ConcurrencyConflictCode is the code of the media API's 433 answer to too
// many tasks at once. The compute platform lists the same code as "user
// frozen" (platform-evidence.md section 4), which is why only a media 433
// (an *APIError: the compute client's errors are envelopes) reads it so.
const ConcurrencyConflictCode = "10007"

// concurrency reports whether the answer speaks of the account's limit of
// tasks at once rather than its daily quota: code 10007, or a message
// naming concurrency (liberal: one client's code shows the answer).
func (e *APIError) concurrency() bool {
	return e.Code == ConcurrencyConflictCode || strings.Contains(strings.ToLower(e.Message), "concurren")
}

// StatusQuotaExhausted is the media API's non-standard HTTP status for an
// exhausted quota (see ErrQuotaExhausted).
const StatusQuotaExhausted = 433

// IsTransient reports whether err is worth retrying later: a network error,
// a deadline, HTTP 429 or 5xx, or a truncated or malformed response. An
// error matching ErrAmbiguous is never transient (retrying could pay twice),
// nor is a cancelled context or a refused argument.
func IsTransient(err error) bool {
	if err == nil ||
		errors.Is(err, ErrAmbiguous) ||
		errors.Is(err, ErrInvalidArgument) ||
		errors.Is(err, context.Canceled) {
		return false
	}
	if ae, ok := errors.AsType[*APIError](err); ok {
		return backoff.RetryableStatus(ae.Status)
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, ErrMalformedResponse)
}

// IsPermanent reports whether err will not go away by retrying: an
// *APIError with a 4xx status other than 429 and 433 or a 3xx (the clients
// never follow redirects), a refused argument, or a failed stream frame. An
// ambiguous error is not permanent either (see ErrAmbiguous), nor is an
// exhausted quota (see ErrQuotaExhausted).
func IsPermanent(err error) bool {
	if err == nil || errors.Is(err, ErrAmbiguous) {
		return false
	}
	if ae, ok := errors.AsType[*APIError](err); ok {
		return ae.Status >= 300 && ae.Status < 500 && ae.Status != http.StatusTooManyRequests && ae.Status != StatusQuotaExhausted
	}
	if _, ok := errors.AsType[*FrameError](err); ok {
		return true
	}
	return errors.Is(err, ErrInvalidArgument)
}

// RetryAfterOf returns the Retry-After delay carried by a 429 or 503
// *APIError in err's chain; ok is false when there is none.
func RetryAfterOf(err error) (d time.Duration, ok bool) {
	ae, isAPI := errors.AsType[*APIError](err)
	if !isAPI || ae.RetryAfter <= 0 {
		return 0, false
	}
	if !backoff.RefusedStatus(ae.Status) {
		return 0, false
	}
	return ae.RetryAfter, true
}

// errorBody is the documented error shape (media-api section 7). Fields
// are lenient: a number where a string is documented (error.code 422) is
// kept as its text.
type errorBody struct {
	Error *struct {
		Message looseString `json:"message"`
		Type    looseString `json:"type"`
		Param   looseString `json:"param"`
		Code    looseString `json:"code"`
	} `json:"error"`
	RequestID looseString `json:"request_id"`
	// Code and Msg (or Message) at the top level are the platform's own
	// envelope, which its 433 answers carry (platform-evidence.md
	// section 6): {"code":"10007","msg":"Concurrency conflict for request"}.
	Code    looseString `json:"code"`
	Msg     looseString `json:"msg"`
	Message looseString `json:"message"`
}

// looseString decodes a JSON string, number or boolean as its text and null
// as "".
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = looseString(v)
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v.(type) {
	case nil:
		*s = ""
	case float64, bool:
		*s = looseString(strings.TrimSpace(string(b)))
	default:
		return fmt.Errorf("want a string, got %s", strings.TrimSpace(string(b))[:1])
	}
	return nil
}

// maxExcerpt bounds the length of any upstream text put into an error.
const maxExcerpt = 300

// newAPIError builds the *APIError of a non-2xx answer. body may be nil;
// secrets (the API key) are removed from every string kept.
func newAPIError(status int, h http.Header, body []byte, now time.Time, secrets ...string) *APIError {
	e := &APIError{Status: status}
	if d, ok := backoff.RetryAfter(h, now); ok {
		e.RetryAfter = d
	}
	var eb errorBody
	read := json.Unmarshal(body, &eb) == nil
	if read && eb.Error != nil {
		e.Type = scrub(string(eb.Error.Type), secrets...)
		e.Code = scrub(string(eb.Error.Code), secrets...)
		e.Param = scrub(string(eb.Error.Param), secrets...)
		e.Message = scrub(string(eb.Error.Message), secrets...)
		e.RequestID = scrub(string(eb.RequestID), secrets...)
		return e
	}
	if read && eb.Code != "" {
		e.Code = scrub(string(eb.Code), secrets...)
		e.Message = scrub(string(cmp.Or(eb.Msg, eb.Message)), secrets...)
		e.RequestID = scrub(string(eb.RequestID), secrets...)
		return e
	}
	e.Message = scrub(string(body), secrets...)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}

// scrub turns upstream text into something safe to put into an error: one
// line of at most maxExcerpt bytes without secrets, URL user information,
// query strings, data URIs or credential-looking key/value pairs (see
// redact.Text).
func scrub(s string, secrets ...string) string {
	s = redact.Text(s, secrets...)
	if len(s) > maxExcerpt {
		cut := maxExcerpt
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}
