package artifacts

import (
	"net/url"
	"regexp"
	"strings"
)

// ScrubURL returns u reduced to scheme://host/path: userinfo, query and
// fragment are dropped, because presigned URLs carry their signature and
// credentials there. A string that does not parse as an absolute URL
// becomes "[unparseable URL]" (it may hold anything).
func ScrubURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" || p.Opaque != "" {
		return "[unparseable URL]"
	}
	s := &url.URL{Scheme: p.Scheme, Host: p.Host, Path: p.Path, RawPath: p.RawPath}
	return s.String()
}

// urlInText finds URL-looking tokens in free text.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// scrubText removes userinfo, query strings and fragments from every URL in
// s, so that the text of an error from a lower layer (which may quote a
// redirect target) is safe to log.
func scrubText(s string) string {
	return urlInText.ReplaceAllStringFunc(s, func(tok string) string {
		scheme, rest, _ := strings.Cut(tok, "://")
		if i := strings.IndexAny(rest, "?#"); i >= 0 {
			rest = rest[:i]
		}
		host, path, hasPath := strings.Cut(rest, "/")
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			host = host[at+1:]
		}
		if hasPath {
			host += "/" + path
		}
		return scheme + "://" + host
	})
}

// scrubbedError presents err with a scrubbed message while keeping it
// matchable with errors.Is and errors.As.
type scrubbedError struct{ err error }

func (e scrubbedError) Error() string { return scrubText(e.err.Error()) }
func (e scrubbedError) Unwrap() error { return e.err }

// scrubErr wraps err so that its message is scrubbed; nil stays nil.
func scrubErr(err error) error {
	if err == nil {
		return nil
	}
	return scrubbedError{err: err}
}
