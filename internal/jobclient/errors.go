package jobclient

import (
	"errors"
	"strings"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/natsconn"
)

// ErrNotSetUp is returned (wrapped) by the readers when the events stream
// or the state bucket does not exist: no worker has run against the server.
var ErrNotSetUp = errors.New("no worker has set up sluice on this server yet")

// ErrNoSuchJob is returned (wrapped) by Status for a job id without a state
// record.
var ErrNoSuchJob = errors.New("no such job")

// ErrTimeout is the cause a caller gives a context whose deadline is the
// user's --timeout (context.WithTimeoutCause), so that Wait reports it
// distinctly from an interrupt.
var ErrTimeout = errors.New("timed out")

// ErrJetStreamDisabled is returned (wrapped) when the server has no
// JetStream.
var ErrJetStreamDisabled = errors.New("JetStream is not enabled on the NATS server")

// ConnectError is returned by Dial when no NATS server could be reached.
// URL is the server list as given, without user information.
type ConnectError struct {
	URL string
	Err error
}

// Error names the servers (without credentials) and the cause.
func (e *ConnectError) Error() string {
	return "cannot connect to NATS at " + e.URL + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *ConnectError) Unwrap() error { return e.Err }

// ReadRefusedError is returned (wrapped) by the readers when the server
// refuses this user reading Stream: its permissions do not allow it.
type ReadRefusedError struct {
	// Stream is the stream the user may not read.
	Stream string
	// Err is the refusal of the API request reading it.
	Err *PublishRefusedError
}

// Error names the stream and the refused subject.
func (e *ReadRefusedError) Error() string {
	return "this NATS user may not read " + e.Stream + " (" + e.Err.Error() + ")"
}

// Unwrap returns the refusal.
func (e *ReadRefusedError) Unwrap() error { return e.Err }

// JobsFullError is the cause of a publish SLUICE_JOBS refused for lack of
// space: the stream, the account or the server is at its limit. Nothing
// of the job was queued; publishing it again once workers have taken jobs
// (or an operator raised the limit) is safe.
type JobsFullError struct {
	// Limits names the limits reached, as far as the server tells: empty
	// when the server's own store is full (or they could not be read).
	Limits []natsconn.Limit
	// Err is the server's refusal.
	Err error
}

// Error names the stream and the limit reached.
func (e *JobsFullError) Error() string {
	what := "the NATS server's JetStream store is full"
	if len(e.Limits) > 0 {
		s := make([]string, len(e.Limits))
		for i, l := range e.Limits {
			s[i] = l.String()
		}
		what = strings.Join(s, "; ")
	}
	return "the jobs stream " + contract.JobsStream + " is full (" + what + "): nothing more can be queued until workers take jobs or an operator raises the limit"
}

// Unwrap returns the server's refusal.
func (e *JobsFullError) Unwrap() error { return e.Err }
