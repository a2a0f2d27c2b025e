package apiclient

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// Sentinel errors of the compute client. The shared ones (ErrAmbiguous,
// ErrUnauthorized, ErrMalformedResponse, ErrInvalidArgument) are declared in
// errors.go and apply to compute calls with the same meaning.
var (
	// ErrJobNotFound is matched when a job query's answer says the job is
	// not there: HTTP 404, no record, or a message saying it does not
	// exist (EnvelopeError.saysMissing). See JobVanished.
	ErrJobNotFound = errors.New("apiclient: compute job not found")

	// ErrNotSupported is matched when the platform has no such operation:
	// HTTP 404 or 405 without an envelope (the gateway knows no route), as
	// for the job history, job list and cancel calls that compute-api.md
	// does not list.
	ErrNotSupported = errors.New("apiclient: the compute platform does not offer this operation")

	// ErrClusterNotFound is returned by Cluster when the token response
	// lists no cluster with the requested name or id.
	ErrClusterNotFound = errors.New("apiclient: compute cluster not found")

	// ErrNoServiceURL is returned when the center lists no enabled address
	// for a service (efileUrls or hpcUrls).
	ErrNoServiceURL = errors.New("apiclient: center lists no enabled address")

	// ErrFileExists, ErrFileMissing, ErrNoPermission and ErrStorageFull
	// are matched by a file call's error envelope with the platform's
	// file codes 911021 (exists, an upload with uncover), 911020
	// (missing), 911030 (no permission) and 911501 (storage full)
	// (platform-evidence.md section 7). The file calls put the words in
	// front of the envelope, naming the path (fileError).
	ErrFileExists   = errors.New("apiclient: file exists")
	ErrFileMissing  = errors.New("apiclient: file missing")
	ErrNoPermission = errors.New("apiclient: no permission on the path")
	ErrStorageFull  = errors.New("apiclient: storage full")
)

// fileCodes maps the platform's file codes to their named errors.
var fileCodes = map[string]error{
	"911021": ErrFileExists,
	"911020": ErrFileMissing,
	"911030": ErrNoPermission,
	"911501": ErrStorageFull,
}

// Is matches the named error of the answer's file code, if any.
func (e *EnvelopeError) Is(target error) bool {
	named, ok := fileCodes[e.Code]
	return ok && named == target
}

// aboutTheThing reports whether the answer's code is about the thing
// asked for (a file code), which a token's expiry never answers: no login
// is tried for it.
func (e *EnvelopeError) aboutTheThing() bool {
	_, ok := fileCodes[e.Code]
	return ok
}

// fileError puts in front of err, a file call's failure about path p, the
// words its file code means, so that a user reads "no permission on
// /public/home/u/in" rather than a code; any other error is returned as
// it is.
func fileError(err error, p string) error {
	env, ok := errors.AsType[*EnvelopeError](err)
	if !ok {
		return err
	}
	switch fileCodes[env.Code] {
	case ErrFileExists:
		return fmt.Errorf("file exists: %s: %w", p, err)
	case ErrFileMissing:
		return fmt.Errorf("file missing: %s: %w", p, err)
	case ErrNoPermission:
		return fmt.Errorf("no permission on %s: %w", p, err)
	case ErrStorageFull:
		return fmt.Errorf("storage full (writing %s): %w", p, err)
	}
	return err
}

// EnvelopeError is a failed compute platform call: a non-2xx HTTP answer
// (with or without an envelope) or a 2xx answer whose envelope code is not
// "0". Msg is scrubbed of credentials and tokens before it is stored.
//
// For a non-2xx answer EnvelopeError unwraps to the equivalent *APIError,
// so IsTransient (429, 5xx), IsPermanent (other 4xx), RetryAfterOf and
// errors.Is(err, ErrUnauthorized) (401, 403) classify it like a media API
// error. A 2xx answer with an error code is neither transient nor
// permanent by those helpers; Temporary reports false for it.
type EnvelopeError struct {
	// Op names the call, e.g. "submit job".
	Op string
	// Status is the HTTP status of the answer.
	Status int
	// Code is the envelope code; "" when the body carried no envelope.
	Code string
	// Msg is the envelope msg, or a short excerpt of a body without one.
	Msg string
	// RetryAfter is the parsed Retry-After header; zero when absent.
	RetryAfter time.Duration
}

// Error returns a one-line description naming the call, status and code.
func (e *EnvelopeError) Error() string {
	var b strings.Builder
	b.WriteString("apiclient: compute ")
	if e.Op != "" {
		b.WriteString(e.Op + ": ")
	}
	fmt.Fprintf(&b, "upstream answered HTTP %d", e.Status)
	if e.Code != "" {
		b.WriteString(" code " + e.Code)
	}
	if e.Msg != "" {
		b.WriteString(": " + e.Msg)
	}
	return b.String()
}

// Unwrap returns the equivalent *APIError of a non-2xx answer, nil for an
// error envelope on a 2xx answer.
func (e *EnvelopeError) Unwrap() error {
	if e.Status >= 200 && e.Status < 300 {
		return nil
	}
	return &APIError{Status: e.Status, Code: e.Code, Message: e.Msg, RetryAfter: e.RetryAfter}
}

// Temporary reports whether retrying later may succeed: HTTP 429 or 5xx.
func (e *EnvelopeError) Temporary() bool {
	return backoff.RetryableStatus(e.Status)
}

// certainlyRejected reports whether the platform refused the request before
// acting on it, so repeating a paid call is safe: 429 and 503.
func (e *EnvelopeError) certainlyRejected() bool {
	return backoff.RefusedStatus(e.Status)
}

// authRejected reports whether the answer refuses the token: 401 or 403.
func (e *EnvelopeError) authRejected() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// noRoute reports whether the answer says the gateway has no such route:
// HTTP 404 or 405 without an envelope code.
func (e *EnvelopeError) noRoute() bool {
	return e.Code == "" && (e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed)
}

// invalidArg builds an ErrInvalidArgument error naming field.
func invalidArg(field, rule string) error {
	return fmt.Errorf("%w: %s %s", ErrInvalidArgument, field, rule)
}
