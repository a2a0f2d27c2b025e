package quota_test

import (
	"context"
	"net/http"
)

type roundTripFunc func()

func (f roundTripFunc) RoundTrip(*http.Request) (*http.Response, error) {
	f()
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
}

func newRequest(ctx context.Context) (*http.Request, error) {
	return http.NewRequestWithContext(ctx, http.MethodGet, "http://upstream.test/", nil)
}
