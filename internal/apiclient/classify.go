package apiclient

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// Class is the one reading of an upstream answer every caller acts on: a
// closed set, so a caller switches on it and never reads an HTTP status or
// an envelope code itself. Which answers mean what, per route, is the
// table in docs/upstream-assumptions.md ("Classes of answers").
type Class int

const (
	// ClassOK: the call did what was asked.
	ClassOK Class = iota
	// ClassMissing: the platform says the thing asked for is not there.
	// Only the answers the evidence names for a route say so (see
	// EnvelopeError.saysMissing): never "any error", never a busy answer.
	// Errors of this class match ErrJobNotFound, ErrInstanceNotFound or
	// (media) ErrTaskNotFound.
	ClassMissing
	// ClassBusy: nothing was learned and nothing was done; ask again
	// later. A network failure on a repeatable call, 429, 5xx, the
	// platform's internal error (10001, HTTP 200), an answer that could
	// not be read, a deadline, an exhausted quota, a concurrency conflict.
	ClassBusy
	// ClassRefused: the platform answered no, and asking again gets the
	// same answer: another 4xx, another error envelope, a rejected token
	// (after its one refresh), an operation it does not offer, a bad
	// argument.
	ClassRefused
	// ClassAmbiguous: a paid or one-shot call that may have acted
	// (ErrAmbiguous): repeating it could pay twice; find what it did.
	ClassAmbiguous
)

// String names the class as the docs and logs do.
func (c Class) String() string {
	switch c {
	case ClassOK:
		return "ok"
	case ClassMissing:
		return "missing"
	case ClassBusy:
		return "busy"
	case ClassRefused:
		return "refused"
	case ClassAmbiguous:
		return "ambiguous"
	}
	return "unknown"
}

// Classify reads err, returned by any call of this package, as its Class.
// The route-specific rule for "missing" is applied where the error is
// made (Job, HistoryJob, Instance, CancelJob wrap the sentinels); Classify
// only reads it back, so no other answer can become missing here.
func Classify(err error) Class {
	if err == nil {
		return ClassOK
	}
	env, isEnv := errors.AsType[*EnvelopeError](err)
	switch {
	case errors.Is(err, ErrAmbiguous):
		return ClassAmbiguous
	case errors.Is(err, ErrJobNotFound), errors.Is(err, ErrInstanceNotFound):
		return ClassMissing
	case !isEnv && errors.Is(err, ErrTaskNotFound):
		// A media task route's 404; a compute 404 unwraps to an
		// *APIError too, and is missing only where a route says so.
		return ClassMissing
	case errors.Is(err, context.Canceled), errors.Is(err, ErrQuotaExhausted), errors.Is(err, ErrConcurrencyConflict):
		return ClassBusy
	case isEnv && env.busy():
		return ClassBusy
	case isEnv && env.Status >= 200 && env.Status < 300:
		return ClassRefused
	}
	if temporary, _ := backoff.Temporary(err); temporary || IsTransient(err) {
		return ClassBusy
	}
	return ClassRefused
}

// busyCodes are the envelope codes by which the platform says it could not
// answer now (platform-evidence.md sections 1 and 4: 10001, internal
// error). Such an answer says nothing about the thing asked for.
var busyCodes = map[string]bool{"10001": true}

// busy reports whether the answer is the platform's "not now": a 2xx
// envelope with a busy code, or HTTP 429 or 5xx.
func (e *EnvelopeError) busy() bool {
	if e.Status >= 200 && e.Status < 300 {
		return busyCodes[e.Code]
	}
	return e.Temporary()
}

// tokenMarkers are the texts by which an error envelope says the token was
// refused. The platform's answer to an expired token is not shown
// (platform-evidence.md section 4), so an envelope is read as a token
// refusal only when its message names the token.
var tokenMarkers = []string{"token", "令牌"}

// saysTokenRejected reports whether the answer refuses the token: HTTP 401
// or 403, or an error envelope whose message names the token. Only then may
// a paid call be sent again with a fresh token: the platform did not act.
func (e *EnvelopeError) saysTokenRejected() bool {
	if e.authRejected() {
		return true
	}
	msg := strings.ToLower(e.Msg)
	for _, m := range tokenMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// missingMarkers are the message texts by which the platform says a job,
// an instance or a file does not exist. The platform has no documented
// "not found" code, so its message is the only signal; clients of the
// platform read the same texts (platform-evidence.md section 1).
var missingMarkers = []string{"不存在", "does not exist", "not exist", "not found", "no such job"}

// saysMissing reports whether the answer says the requested job, instance
// or file is not there: HTTP 404, or a 2xx error envelope whose message
// says so (a route whose gateway may answer 404 for want of the route
// itself tells that apart first: noRoute, ErrNoContainerService). It is the one rule for every route that can
// answer "missing"; a token refusal or a busy answer never does, whatever
// its message.
func (e *EnvelopeError) saysMissing() bool {
	switch {
	case e.authRejected(), e.busy() && e.Status != http.StatusNotFound:
		return false
	case e.Status == http.StatusNotFound:
		return true
	case e.Status < 200 || e.Status > 299:
		return false
	}
	msg := strings.ToLower(e.Msg)
	for _, m := range missingMarkers {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
