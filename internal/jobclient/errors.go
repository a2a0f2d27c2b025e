package jobclient

import "errors"

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
