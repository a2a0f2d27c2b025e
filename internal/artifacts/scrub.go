package artifacts

import "github.com/sluice-dev/sluice/internal/redact"

// scrubbedError presents err with its message passed through redact.Text
// (a lower layer may quote a redirect target with its signature) while
// keeping it matchable with errors.Is and errors.As.
type scrubbedError struct{ err error }

func (e scrubbedError) Error() string { return redact.Text(e.err.Error()) }
func (e scrubbedError) Unwrap() error { return e.err }

// scrubErr wraps err so that its message is scrubbed; nil stays nil.
func scrubErr(err error) error {
	if err == nil {
		return nil
	}
	return scrubbedError{err: err}
}
