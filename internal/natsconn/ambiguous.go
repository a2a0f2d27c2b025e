package natsconn

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ambiguous reports whether a JetStream write (a publish, a key-value
// compare-and-set) that failed with err may have been stored all the same,
// or may be stored if sent again: its answer timed out or was lost with a
// connection, or the stream could not answer for the moment (no
// responders, 503 during a leader election). A writer then asks again or
// reads back before it gives up; the end of the caller's own ctx is not
// ambiguous: the caller gave up, nor is a refusal for lack of space
// (NoSpace), which some servers send with the code 503 too.
func Ambiguous(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == 503 && !NoSpace(err)
	}
	return false
}
