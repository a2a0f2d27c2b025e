package jobspec

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

// ErrInvalidS3URL is returned (wrapped) by ParseS3URL.
var ErrInvalidS3URL = errors.New("jobspec: invalid s3 URL")

// MaxS3KeyBytes is the longest object key S3 allows.
const MaxS3KeyBytes = 1024

// ParseS3URL splits "s3://bucket/key/with/slashes" into its bucket and key.
// The bucket must follow the S3 naming rules (3 to 63 characters of
// lowercase letters, digits, dots and hyphens, starting and ending with a
// letter or digit, no two adjacent dots, not an IP address); the key must be
// 1 to 1024 bytes without control characters and is returned verbatim.
// Errors wrap ErrInvalidS3URL and never repeat the URL.
func ParseS3URL(u string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(u, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%w: must start with s3://", ErrInvalidS3URL)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if key == "" {
		return "", "", fmt.Errorf("%w: key must not be empty", ErrInvalidS3URL)
	}
	if rule := bucketRule(bucket); rule != "" {
		return "", "", fmt.Errorf("%w: bucket %s", ErrInvalidS3URL, rule)
	}
	switch {
	case len(key) > MaxS3KeyBytes:
		return "", "", fmt.Errorf("%w: key must be at most %d bytes", ErrInvalidS3URL, MaxS3KeyBytes)
	case hasControl(key):
		return "", "", fmt.Errorf("%w: key must not contain control characters", ErrInvalidS3URL)
	}
	return bucket, key, nil
}

func bucketRule(b string) string {
	if len(b) < 3 || len(b) > 63 {
		return "must be 3 to 63 characters"
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return "must hold only lowercase letters, digits, dots and hyphens"
		}
	}
	if !alnum(b[0]) || !alnum(b[len(b)-1]) {
		return "must start and end with a letter or digit"
	}
	if strings.Contains(b, "..") {
		return "must not contain two adjacent dots"
	}
	if net.ParseIP(b) != nil {
		return "must not be an IP address"
	}
	return ""
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// mediaURLRule returns the rule a video media address breaks, or "". An
// address is an http(s) URL, s3://bucket/key, or a base64 data URI whose
// MIME type is of class ("image", "video" or "audio"). The rule never
// repeats the address, which may carry a presigned query.
func mediaURLRule(u, class string) string {
	switch {
	case u == "":
		return "required (must not be empty)"
	case strings.HasPrefix(u, "s3://"):
		return s3URLRule(u)
	case strings.HasPrefix(u, "data:"):
		return dataURIRule(u, class)
	case strings.HasPrefix(u, "http://"), strings.HasPrefix(u, "https://"):
		return httpURLRule(u)
	}
	return "must be an http(s) URL, a base64 data URI (data:<mime>;base64,<payload>) or s3://bucket/key"
}

// sourceURLRule returns the rule a compute input's from breaks, or "":
// s3://bucket/key or an https URL.
func sourceURLRule(u string) string {
	switch {
	case u == "":
		return "required (must not be empty)"
	case strings.HasPrefix(u, "s3://"):
		return s3URLRule(u)
	case strings.HasPrefix(u, "https://"):
		return httpURLRule(u)
	}
	return "must be s3://bucket/key or an https:// URL"
}

// s3URLRule checks an address already known to start with s3://.
func s3URLRule(u string) string {
	if _, _, err := ParseS3URL(u); err != nil {
		return "must be s3://bucket/key: " + strings.TrimPrefix(err.Error(), ErrInvalidS3URL.Error()+": ")
	}
	return ""
}

// httpURLRule checks an address already known to start with http:// or
// https://.
func httpURLRule(u string) string {
	parsed, err := url.Parse(u)
	switch {
	case err != nil || hasControl(u) || strings.ContainsAny(u, " \\"):
		return "must be a well-formed URL"
	case parsed.Host == "" || parsed.Hostname() == "":
		return "must name a host"
	case parsed.User != nil:
		return "must not carry credentials (user:password@)"
	}
	return ""
}

// dataURIRule checks data:<type>/<subtype>;base64,<payload> with a MIME type
// of class and a non-empty, padded standard base64 payload.
func dataURIRule(u, class string) string {
	const shape = "must be a base64 data URI: data:<mime>;base64,<payload>"
	meta, payload, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok {
		return shape
	}
	mime, ok := strings.CutSuffix(meta, ";base64")
	if !ok || !mimeType(mime) {
		return shape
	}
	if !strings.HasPrefix(mime, class+"/") {
		return fmt.Sprintf("data URI MIME type must be %s/* for this role", class)
	}
	if !base64Payload(payload) {
		return "data URI payload must be non-empty, padded standard base64"
	}
	return ""
}

// mimeType reports whether s is type/subtype made of RFC 6838 name
// characters.
func mimeType(s string) bool {
	typ, sub, ok := strings.Cut(s, "/")
	return ok && mimeName(typ) && mimeName(sub)
}

func mimeName(s string) bool {
	if s == "" || len(s) > 127 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && strings.IndexByte("!#$&^_.+-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// base64Payload reports whether s is non-empty standard base64 with
// padding, checking the alphabet itself: encoding/base64 would skip
// newlines that the JSON Schema pattern rejects.
func base64Payload(s string) bool {
	if s == "" || len(s)%4 != 0 {
		return false
	}
	body := strings.TrimSuffix(strings.TrimSuffix(s, "="), "=")
	if len(s)-len(body) > 2 {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// absPathRule returns the rule a cluster path breaks, or "": absolute, no
// ".." segment, no control characters; dir allows a trailing "/", a file
// path may not have one.
func absPathRule(p string, dir bool) string {
	switch {
	case p == "":
		return "required (must not be empty)"
	case !strings.HasPrefix(p, "/"):
		return `must be an absolute path (start with "/")`
	case hasControl(p):
		return "must not contain control characters"
	case slices.Contains(strings.Split(p, "/"), ".."):
		return `must not have a ".." segment`
	case !dir && strings.HasSuffix(p, "/"):
		return `must be a file path (no trailing "/")`
	}
	return ""
}

// hasControl reports whether s holds a C0 or C1 control character or DEL:
// the same rule as an S3 key's (package artifacts), so that an accepted
// output.prefix always makes a key.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}
