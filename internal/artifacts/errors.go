package artifacts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/aws/smithy-go"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// Sentinel errors of the package; match them with errors.Is.
var (
	// ErrTooLarge means a source had, or announced, more bytes than the
	// limit of the copy. It is permanent: retrying fetches the same bytes.
	ErrTooLarge = errors.New("artifacts: artifact larger than the limit")

	// ErrPrivateAddress means a download would have connected to a
	// loopback, private, link-local, shared (CGNAT), unspecified, multicast
	// or otherwise non-public address while private addresses are not
	// allowed. It is permanent.
	ErrPrivateAddress = errors.New("artifacts: destination address is not public")

	// ErrUnsupportedScheme means a download URL, or a redirect it
	// followed, was not http or https. It is permanent.
	ErrUnsupportedScheme = errors.New("artifacts: URL scheme is not http or https")

	// ErrTooManyRedirects means a download followed more redirects than
	// allowed. It is permanent.
	ErrTooManyRedirects = errors.New("artifacts: too many redirects")

	// ErrNotFound means an S3 object or bucket does not exist.
	ErrNotFound = errors.New("artifacts: object not found")

	// ErrInvalidArgument means a call was refused before anything was sent:
	// a bad key part, configuration or parameter. The message names the
	// field.
	ErrInvalidArgument = errors.New("artifacts: invalid argument")

	// ErrShortBody means a source ended before the length it announced
	// (its Content-Length), or a download without a length ended empty
	// with nothing to show it was complete (no chunked framing, no
	// HTTP/2 stream end): what was read is not what upstream served.
	// It is temporary: the copy opens the source again.
	ErrShortBody = errors.New("artifacts: source ended before its announced end")

	// ErrStoreRefused means the artifact store refused a write for a
	// reason that lasts until someone acts: credentials unknown, revoked
	// or expired, a signature refused, access denied by policy, the
	// bucket missing. Copy does not retry it; the caller decides how long
	// to wait for the store (see IsStoreRefusal).
	ErrStoreRefused = errors.New("artifacts: the artifact store refused the write")
)

// storeRefusalCodes are the S3 error codes that refuse a write until
// someone changes the credentials, the policy or the bucket.
var storeRefusalCodes = map[string]bool{
	"AccessDenied":          true,
	"AllAccessDisabled":     true,
	"ExpiredToken":          true,
	"InvalidAccessKeyId":    true,
	"InvalidToken":          true,
	"NoSuchBucket":          true,
	"SignatureDoesNotMatch": true,
}

// IsStoreRefusal reports whether err is an S3 answer refusing a request
// for a lasting reason (storeRefusalCodes), by the error code the store
// sent.
func IsStoreRefusal(err error) bool {
	if errors.Is(err, ErrStoreRefused) {
		return true
	}
	ae, ok := errors.AsType[smithy.APIError](err)
	return ok && storeRefusalCodes[ae.ErrorCode()]
}

// invalidf returns an error wrapping ErrInvalidArgument whose message names
// field.
func invalidf(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, field, fmt.Sprintf(format, args...))
}

// FetchError is the failure of one download. URL is scrubbed (scheme, host
// and path only), and the message of Err is scrubbed of URL query strings
// and credentials too, so the error is safe to log or publish.
type FetchError struct {
	// Status is the HTTP status of the answer, or 0 when none was received
	// (a network error, a refused destination, a bad URL).
	Status int
	// URL is the requested URL without userinfo, query or fragment.
	URL string
	// RetryAfter is the delay the server asked for with Retry-After on a
	// 429 or 503; zero when absent.
	RetryAfter time.Duration
	// Err is the cause; nil for a plain non-2xx answer.
	Err error
}

// Error returns a one-line, secret-free description.
func (e *FetchError) Error() string {
	switch {
	case e.Status != 0 && e.Err != nil:
		return fmt.Sprintf("fetch %s: HTTP %d: %v", e.URL, e.Status, e.Err)
	case e.Status != 0:
		return fmt.Sprintf("fetch %s: HTTP %d %s", e.URL, e.Status, http.StatusText(e.Status))
	default:
		return fmt.Sprintf("fetch %s: %v", e.URL, e.Err)
	}
}

// Unwrap returns the cause.
func (e *FetchError) Unwrap() error { return e.Err }

// Temporary reports whether the download may succeed when tried again: a
// network error (also in the middle of the body), HTTP 408, 429 or 5xx. A
// refused destination or scheme, too many redirects, a source over the
// limit, a TLS certificate failure, an unknown host, a cancelled context
// and any other 4xx are permanent.
func (e *FetchError) Temporary() bool {
	switch {
	case errors.Is(e.Err, ErrTooLarge),
		errors.Is(e.Err, ErrPrivateAddress),
		errors.Is(e.Err, ErrUnsupportedScheme),
		errors.Is(e.Err, ErrTooManyRedirects),
		errors.Is(e.Err, ErrInvalidArgument),
		errors.Is(e.Err, context.Canceled):
		return false
	case e.Err == nil:
		return retryableStatus(e.Status)
	case isCertificateError(e.Err):
		return false
	}
	if dns, ok := errors.AsType[*net.DNSError](e.Err); ok && dns.IsNotFound {
		return false
	}
	return true
}

// isCertificateError reports whether err is a TLS verification failure,
// which does not heal by retrying.
func isCertificateError(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.CertificateInvalidError](err)
	return ok
}

// Transient marks err as temporary for Copy: an OpenFunc wraps with it the
// failures of its source that are worth retrying (the compute client's
// transient errors, say). Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

// transientError is the marker built by Transient.
type transientError struct{ err error }

func (e *transientError) Error() string   { return e.err.Error() }
func (e *transientError) Unwrap() error   { return e.err }
func (e *transientError) Temporary() bool { return true }

// IsTemporary reports whether a failed copy may succeed when tried again
// with a fresh source: errors carrying a Temporary() bool method answer for
// themselves (*FetchError, Transient); S3 answers with status 5xx or 429,
// network errors and truncated bodies (ErrShortBody) are temporary.
// ErrTooLarge, ErrPrivateAddress, ErrUnsupportedScheme,
// ErrTooManyRedirects, ErrInvalidArgument, ErrNotFound, ErrStoreRefused, a
// cancelled context and every other error are permanent.
func IsTemporary(err error) bool {
	if err == nil ||
		errors.Is(err, ErrTooLarge) ||
		errors.Is(err, ErrPrivateAddress) ||
		errors.Is(err, ErrUnsupportedScheme) ||
		errors.Is(err, ErrTooManyRedirects) ||
		errors.Is(err, ErrInvalidArgument) ||
		errors.Is(err, ErrNotFound) ||
		errors.Is(err, ErrStoreRefused) ||
		errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrShortBody) {
		return true
	}
	// Our own verdicts come first: a *FetchError or Transient mark sits
	// outside the network error it wraps.
	if fe, ok := errors.AsType[*FetchError](err); ok {
		return fe.Temporary()
	}
	if _, ok := errors.AsType[*transientError](err); ok {
		return true
	}
	// An S3 answer carries its HTTP status.
	if s := httpStatus(err); s != 0 {
		return retryableStatus(s)
	}
	// A network error left is the store's (downloads answered above as a
	// *FetchError) or an unclassified one of an OpenFunc: temporary, an
	// unknown host included. The store's name vanishes from DNS while it
	// is down (a stopped container, a service without endpoints), and
	// failing the job then would throw away a result that was paid for.
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	temporary, _ := backoff.Temporary(err)
	return temporary
}

// retryableStatus is the clients' rule for an HTTP status worth retrying
// (429, 5xx) plus 408, which downloads and S3 may answer on a slow request.
func retryableStatus(code int) bool {
	return code == http.StatusRequestTimeout || backoff.RetryableStatus(code)
}

// statusError is an error carrying an HTTP status, as every S3 answer
// error of the AWS SDK does.
type statusError interface {
	error
	HTTPStatusCode() int
}

// httpStatus returns the HTTP status of an S3 answer in err's chain, or 0.
func httpStatus(err error) int {
	if se, ok := errors.AsType[statusError](err); ok {
		return se.HTTPStatusCode()
	}
	return 0
}
