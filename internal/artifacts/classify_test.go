package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func TestContentType(t *testing.T) {
	t.Parallel()
	tests := []struct{ header, name, want string }{
		{"video/mp4", "x.bin", "video/mp4"},
		{"Video/MP4; Codecs=avc1", "x", "video/mp4; codecs=avc1"},
		{"application/octet-stream", "a.mp4", "video/mp4"},
		{"binary/octet-stream", "a.mov", "video/quicktime"},
		{"", "a.MP3", "audio/mpeg"},
		{"", "a.wav", "audio/wav"},
		{"", "a.pcm", "application/octet-stream"},
		{"", "job.out", "text/plain"},
		{"", "job.err", "text/plain"},
		{"", "run.log", "text/plain"},
		{"", "notes.txt", "text/plain"},
		{"", "blob", "application/octet-stream"},
		{"not a type", "a.mp4", "video/mp4"},
		{"text/plain\r\nX-Injected: 1", "a.mp4", "video/mp4"},
	}
	for _, tt := range tests {
		if got := ContentType(tt.header, tt.name); got != tt.want {
			t.Errorf("ContentType(%q, %q) = %q, want %q", tt.header, tt.name, got, tt.want)
		}
	}
}

func TestIsPublic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		{"93.184.216.34", true},
		{"8.8.8.8", true},
		{"2606:4700::1111", true},
		{"127.0.0.1", false},
		{"127.8.9.10", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.1.2.3", false},
		{"::ffff:8.8.8.8", true},
		{"10.0.0.1", false},
		{"172.16.5.4", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false},
		{"::ffff:169.254.169.254", false},
		{"100.64.0.1", false},
		{"100.127.255.254", false},
		{"100.128.0.1", true},
		{"0.0.0.0", false},
		{"::", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"ff02::1", false},
		{"fe80::1", false},
		{"fc00::1", false},
		{"fd12:3456::1", false},
		{"fec0::1", false},
		{"64:ff9b::7f00:1", false},  // NAT64 of 127.0.0.1
		{"64:ff9b::808:808", true},  // NAT64 of 8.8.8.8
		{"2002:a00:1::1", false},    // 6to4 of 10.0.0.1
		{"2002:808:808::1", true},   // 6to4 of 8.8.8.8
		{"::a00:1", false},          // IPv4-compatible 10.0.0.1
		{"64:ff9b:1::a00:1", false}, // local-use NAT64
		{"198.18.0.1", false},
	}
	for _, tt := range tests {
		if got := isPublic(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("isPublic(%s) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

// statusErr is an S3-style answer error as the SDK returns it.
func statusErr(status int) error {
	return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
		Err:      errors.New("api error"),
	}}
}

func TestIsTemporary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"Nil", nil, false},
		{"TooLarge", fmt.Errorf("x: %w", ErrTooLarge), false},
		{"TooLargeInsideTemporaryLookingFetch", &FetchError{Status: 200, Err: ErrTooLarge}, false},
		{"PrivateAddress", &FetchError{Err: fmt.Errorf("dial: %w", ErrPrivateAddress)}, false},
		{"Scheme", &FetchError{Err: ErrUnsupportedScheme}, false},
		{"Redirects", &FetchError{Err: ErrTooManyRedirects}, false},
		{"Fetch503", &FetchError{Status: 503}, true},
		{"Fetch500", &FetchError{Status: 500}, true},
		{"Fetch429", &FetchError{Status: 429}, true},
		{"Fetch408", &FetchError{Status: 408}, true},
		{"Fetch404", &FetchError{Status: 404}, false},
		{"Fetch403", &FetchError{Status: 403}, false},
		{"FetchNetwork", &FetchError{Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, true},
		{"FetchBodyReset", &FetchError{Status: 200, Err: syscall.ECONNRESET}, true},
		{"FetchNoSuchHost", &FetchError{Err: &net.DNSError{IsNotFound: true}}, false},
		{"FetchCanceled", &FetchError{Err: context.Canceled}, false},
		{"S3Status503", statusErr(503), true},
		{"S3Status500", statusErr(500), true},
		{"S3Status429", statusErr(429), true},
		{"S3Status403", statusErr(403), false},
		{"S3Status404", statusErr(404), false},
		{"WrappedS3Status503", fmt.Errorf("upload: %w", statusErr(503)), true},
		{"NetOpError", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true},
		{"StoreNoSuchHost", fmt.Errorf("upload: %w", &net.OpError{Op: "dial", Err: &net.DNSError{IsNotFound: true}}), true},
		{"Reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"UnexpectedEOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"Canceled", context.Canceled, false},
		{"NotFound", fmt.Errorf("%w: x", ErrNotFound), false},
		{"Invalid", invalidf("key", "bad"), false},
		{"Transient", Transient(errors.New("compute says later")), true},
		{"TransientOfTooLarge", Transient(ErrTooLarge), false},
		{"Plain", errors.New("something"), false},
	}
	for _, tt := range tests {
		if got := IsTemporary(tt.err); got != tt.want {
			t.Errorf("%s: IsTemporary(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestScrubErr(t *testing.T) {
	t.Parallel()
	if scrubErr(nil) != nil {
		t.Fatal("scrubErr(nil) is not nil")
	}
	cause := errors.New(`failed to parse Location header "https://u:SECRET@cdn.test/a?sig=SECRET&x=1": bad, see http://h.test/p#SECRET`)
	err := scrubErr(fmt.Errorf("get: %w", cause))
	got := err.Error()
	if strings.Contains(got, "SECRET") {
		t.Fatalf("scrubErr left a secret: %q", got)
	}
	if !strings.Contains(got, "https://cdn.test/a") || !strings.Contains(got, "http://h.test/p") {
		t.Fatalf("scrubErr dropped too much: %q", got)
	}
	if !errors.Is(err, cause) {
		t.Fatal("scrubErr hides its cause from errors.Is")
	}
}

func TestDelay(t *testing.T) {
	t.Parallel()
	s := &Store{cfg: StoreConfig{MinBackoff: time.Second, MaxBackoff: 10 * time.Second}}
	tests := []struct {
		attempt int
		err     error
		want    time.Duration
	}{
		{1, errors.New("x"), time.Second},
		{2, errors.New("x"), 2 * time.Second},
		{3, errors.New("x"), 4 * time.Second},
		{4, errors.New("x"), 8 * time.Second},
		{5, errors.New("x"), 10 * time.Second},
		{1, &FetchError{Status: 429, RetryAfter: 7 * time.Second}, 7 * time.Second},
		{3, &FetchError{Status: 503, RetryAfter: time.Second}, 4 * time.Second},
		{1, &FetchError{Status: 503, RetryAfter: time.Hour}, 10 * time.Second},
	}
	for _, tt := range tests {
		if got := s.delay(tt.attempt, tt.err); got != tt.want {
			t.Errorf("delay(%d, %v) = %s, want %s", tt.attempt, tt.err, got, tt.want)
		}
	}
}
