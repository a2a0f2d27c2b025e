package apiclient

import "net/http"

// withoutRedirects returns a copy of hc that hands a redirect back as the
// answer instead of following it. An API answers, it does not redirect;
// following one would re-send a paid submit, its body (presigned URLs) and
// custom credential headers (the compute platform's password and token,
// which net/http forwards to any host) wherever the redirect points,
// cloud metadata addresses included. The redirect then fails the call
// like any other unexpected status.
func withoutRedirects(hc *http.Client) *http.Client {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}
