package apiclient

import (
	"io"
	"net/http"
	"sync"

	"golang.org/x/time/rate"
)

// Limit returns a RoundTripper that sends at most maxConcurrent requests
// through base at once (a request holds its slot until its response body is
// closed, so a streamed download counts for as long as it streams) and at
// most perSecond requests per second, with a burst of maxConcurrent. Waits
// end with the request's context.
func Limit(base http.RoundTripper, maxConcurrent int, perSecond float64) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &limited{
		base:    base,
		slots:   make(chan struct{}, max(maxConcurrent, 1)),
		limiter: rate.NewLimiter(rate.Limit(perSecond), max(maxConcurrent, 1)),
	}
}

type limited struct {
	base    http.RoundTripper
	slots   chan struct{}
	limiter *rate.Limiter
}

func (l *limited) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := l.limiter.Wait(ctx); err != nil {
		<-l.slots
		return nil, err
	}
	resp, err := l.base.RoundTrip(req)
	if err != nil {
		<-l.slots
		return nil, err
	}
	resp.Body = &releaseOnClose{ReadCloser: resp.Body, release: func() { <-l.slots }}
	return resp, nil
}

type releaseOnClose struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (r *releaseOnClose) Close() error {
	err := r.ReadCloser.Close()
	r.once.Do(r.release)
	return err
}
