package jobclient

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// PublishRefusedError is the cause of an operation the server refused
// because the user may not publish to Subject (a permissions violation).
type PublishRefusedError struct {
	// Subject is the subject the user may not publish to.
	Subject string
	// Err is the server's error as the connection reported it.
	Err error
}

// Error names the subject.
func (e *PublishRefusedError) Error() string {
	return "permission to publish to " + strconv.Quote(e.Subject) + " denied"
}

// Unwrap returns the server's error, which wraps nats.ErrPermissionViolation.
func (e *PublishRefusedError) Unwrap() error { return e.Err }

// refusals passes the server's refusals of this connection's publishes to
// the operations waiting on those subjects. A server refuses a publish it
// does not permit with an asynchronous -ERR only: a request on such a
// subject (a JetStream publish, an API call) would otherwise wait for its
// timeout, and an update of a state record would then retry it as a write
// whose outcome is unknown.
type refusals struct {
	mu    sync.Mutex
	waits map[*refusalWait]struct{}
	// next is the connection's error handler before this one: every error
	// not waited for goes on to it.
	next nats.ErrHandler
}

type refusalWait struct {
	subjects []string
	cancel   context.CancelCauseFunc
}

// watchRefusals installs a refusals on nc, keeping nc's own error handler
// for everything else.
func watchRefusals(nc *nats.Conn) *refusals {
	r := &refusals{waits: make(map[*refusalWait]struct{}), next: nc.Opts.AsyncErrorCB}
	nc.SetErrorHandler(r.handle)
	return r
}

func (r *refusals) handle(nc *nats.Conn, sub *nats.Subscription, err error) {
	if sub == nil && errors.Is(err, nats.ErrPermissionViolation) {
		// The server's text: Permissions Violation for Publish to "subject".
		refused, ok := refusedSubject(err.Error())
		consumed := false
		r.mu.Lock()
		for w := range r.waits {
			for _, s := range w.subjects {
				if ok && subjectMatches(s, refused) {
					w.cancel(&PublishRefusedError{Subject: refused, Err: err})
					consumed = true
				}
			}
		}
		r.mu.Unlock()
		if consumed {
			return
		}
	}
	if r.next != nil {
		r.next(nc, sub, err)
	}
}

// refusedSubject returns the subject of a permissions violation's text
// (Permissions Violation for Publish to "subject").
func refusedSubject(msg string) (string, bool) {
	_, rest, ok := strings.Cut(msg, "Publish to ")
	if !ok {
		return "", false
	}
	subject, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", false
	}
	subject, err = strconv.Unquote(subject)
	return subject, err == nil
}

// subjectMatches reports whether subject is pattern, or falls under a
// pattern ending in ".>".
func subjectMatches(pattern, subject string) bool {
	if prefix, ok := strings.CutSuffix(pattern, ">"); ok && strings.HasSuffix(prefix, ".") {
		return strings.HasPrefix(subject, prefix)
	}
	return pattern == subject
}

// refusable returns a context derived from ctx that ends, with a
// *PublishRefusedError as its cause, as soon as the server refuses a publish
// of this client to one of subjects (a subject ending in ".>" stands for
// every subject under it); stop releases it. On a client without
// a watch (New) it is ctx with a plain cancel.
func (c *Client) refusable(ctx context.Context, subjects ...string) (context.Context, func()) {
	rctx, cancel := context.WithCancelCause(ctx)
	if c.refused == nil {
		return rctx, func() { cancel(nil) }
	}
	w := &refusalWait{subjects: subjects, cancel: cancel}
	c.refused.mu.Lock()
	c.refused.waits[w] = struct{}{}
	c.refused.mu.Unlock()
	return rctx, func() {
		c.refused.mu.Lock()
		delete(c.refused.waits, w)
		c.refused.mu.Unlock()
		cancel(nil)
	}
}

// refusedBy returns the refusal that ended rctx (see refusable), or nil.
func refusedBy(rctx context.Context) *PublishRefusedError {
	var refused *PublishRefusedError
	if errors.As(context.Cause(rctx), &refused) {
		return refused
	}
	return nil
}

// kvSubject is the subject a put of key in bucket publishes to.
func kvSubject(bucket, key string) string { return fmt.Sprintf("$KV.%s.%s", bucket, key) }
