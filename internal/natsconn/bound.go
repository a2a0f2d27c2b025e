package natsconn

import (
	"context"
	"time"
)

// RequestTimeout bounds every NATS request on the job path, whatever
// deadline its caller's context has (a job's has none, a stream's is
// hours away): 5s, the JetStream client's default for its
// own publishes and API calls, so both paths of one write wait alike.
const RequestTimeout = 5 * time.Second

// Bounded returns ctx bounded by RequestTimeout, or by its own deadline
// when that is sooner: a request whose answer is lost (a leader change, a
// connection gone at the wrong moment) then ends with a timeout, which
// Ambiguous reports as "may have been applied", instead of waiting as
// long as the caller's context lives, for ever for a job.
func Bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, RequestTimeout)
}
