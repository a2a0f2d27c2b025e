package natsconn

import (
	"context"
	"time"
)

// RequestTimeout bounds a NATS request whose caller's context has no
// deadline (a job's has none): 5s, the JetStream client's default for its
// own publishes and API calls, so both paths of one write wait alike.
const RequestTimeout = 5 * time.Second

// Bounded returns ctx as it is when it has a deadline, else ctx bounded by
// RequestTimeout: a request whose answer is lost (a leader change, a
// connection gone at the wrong moment) then ends with a timeout, which
// Ambiguous reports as "may have been applied", instead of waiting as
// long as the caller's context lives, for ever for a job.
func Bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, RequestTimeout)
}
