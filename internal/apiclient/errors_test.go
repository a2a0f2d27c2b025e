package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestNewAPIError(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   APIError
	}{
		{"documented", 400, nil,
			`{"error":{"message":"duration out of range","type":"invalid_request_error","param":"parameters.duration","code":"invalid_parameter"},"request_id":"r-1"}`,
			APIError{Status: 400, Type: "invalid_request_error", Code: "invalid_parameter", Param: "parameters.duration", Message: "duration out of range", RequestID: "r-1"}},
		{"numeric code, null param", 422, nil,
			`{"error":{"message":"task is already succeeded","type":"invalid_task_status","param":null,"code":422},"request_id":"r-2"}`,
			APIError{Status: 422, Type: "invalid_task_status", Code: "422", Message: "task is already succeeded", RequestID: "r-2"}},
		{"retry after seconds", 429, http.Header{"Retry-After": {"12"}},
			`{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`,
			APIError{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "slow down", RetryAfter: 12 * time.Second}},
		{"retry after date", 503, http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, ``,
			APIError{Status: 503, Message: "Service Unavailable", RetryAfter: 30 * time.Second}},
		{"html body", 502, nil, "<html>\n<b>Bad gateway</b>\n</html>",
			APIError{Status: 502, Message: "<html> <b>Bad gateway</b> </html>"}},
		{"json without error object", 500, nil, `{"message":"boom"}`,
			APIError{Status: 500, Message: `{"message":"boom"}`}},
		{"error of wrong type", 500, nil, `{"error":"boom"}`,
			APIError{Status: 500, Message: `{"error":"boom"}`}},
		{"platform envelope, code a string", 433, nil, `{"code":"10007","msg":"Concurrency conflict for request"}`,
			APIError{Status: 433, Code: "10007", Message: "Concurrency conflict for request"}},
		{"platform envelope, code a number", 433, nil, `{"code":10007,"msg":"Concurrency conflict for request","request_id":"r-3"}`,
			APIError{Status: 433, Code: "10007", Message: "Concurrency conflict for request", RequestID: "r-3"}},
		{"platform envelope, message", 433, nil, `{"code":"10007","message":"too many at once"}`,
			APIError{Status: 433, Code: "10007", Message: "too many at once"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := newAPIError(tt.status, tt.header, []byte(tt.body), now)
			if *got != tt.want {
				t.Fatalf("got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
}

func TestScrub(t *testing.T) {
	t.Parallel()
	const key = "sk-live-abcdef"
	tests := []struct {
		in, want string
	}{
		{"plain message", "plain message"},
		{"bad key " + key + " given", "bad key [redacted] given"},
		{"header Authorization: Bearer eyJhbGciOi.x.y rejected", "header Authorization: [redacted] [redacted] rejected"},
		{"cannot fetch https://b.s3.test/k.png?X-Amz-Signature=abc&X-Amz-Credential=AKIA now", "cannot fetch https://b.s3.test/k.png now"},
		{"got Bearer abc.def", "got Bearer [redacted]"},
		{"see https://user:pw@host.test/x#frag", "see https://host.test/x"},
		{`{"token": "t0k3n", "n": 1}`, `{"token": "[redacted]", "n": 1}`},
		{"password=hunter2&x=1", "password=[redacted]&x=1"},
		{"image data:image/png;base64,iVBORw0KGgo= is too big", "image data:[omitted] is too big"},
		{"two\nlines\tand\x00nul", "two lines and nul"},
		{strings.Repeat("é", 400), strings.Repeat("é", 150) + "…"},
	}
	for _, tt := range tests {
		if got := scrub(tt.in, key); got != tt.want {
			t.Errorf("scrub(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestErrorClasses(t *testing.T) {
	t.Parallel()
	api := func(status int, retryAfter time.Duration) error {
		return fmt.Errorf("op: %w", &APIError{Status: status, RetryAfter: retryAfter})
	}
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name                 string
		err                  error
		transient, permanent bool
		retryAfter           time.Duration
	}{
		{"nil", nil, false, false, 0},
		{"429 with Retry-After", api(429, 5*time.Second), true, false, 5 * time.Second},
		{"503 with Retry-After", api(503, time.Second), true, false, time.Second},
		{"500 with Retry-After", api(500, time.Second), true, false, 0},
		{"502", api(502, 0), true, false, 0},
		{"400", api(400, 0), false, true, 0},
		{"404", api(404, 0), false, true, 0},
		{"422", api(422, 0), false, true, 0},
		{"433 quota exhausted", api(433, time.Second), false, false, 0},
		{"433 concurrency conflict", fmt.Errorf("op: %w", &APIError{Status: 433, Code: "10007"}), false, false, 0},
		{"307 redirect", api(307, 0), false, true, 0},
		{"network", fmt.Errorf("get: %w", netErr), true, false, 0},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, false, 0},
		{"malformed", fmt.Errorf("%w: x", ErrMalformedResponse), true, false, 0},
		{"deadline", context.DeadlineExceeded, true, false, 0},
		{"canceled", context.Canceled, false, false, 0},
		{"ambiguous 500", fmt.Errorf("%w: %w", ErrAmbiguous, &APIError{Status: 500}), false, false, 0},
		{"ambiguous network", fmt.Errorf("%w: %w", ErrAmbiguous, netErr), false, false, 0},
		{"invalid argument", fmt.Errorf("%w: task_id", ErrInvalidArgument), false, true, 0},
		{"frame error", &FrameError{Code: "x"}, false, true, 0},
		{"stream incomplete", fmt.Errorf("%w (%w)", ErrStreamIncomplete, ErrAmbiguous), false, false, 0},
		{"other", errors.New("mystery"), false, false, 0},
	}
	for _, tt := range tests {
		if got := IsTransient(tt.err); got != tt.transient {
			t.Errorf("%s: IsTransient = %v", tt.name, got)
		}
		if got := IsPermanent(tt.err); got != tt.permanent {
			t.Errorf("%s: IsPermanent = %v", tt.name, got)
		}
		d, ok := RetryAfterOf(tt.err)
		if d != tt.retryAfter || ok != (tt.retryAfter > 0) {
			t.Errorf("%s: RetryAfterOf = %v, %v", tt.name, d, ok)
		}
	}
}

func TestAPIErrorIs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err    *APIError
		target error
		want   bool
	}{
		{&APIError{Status: 422, Type: "invalid_task_status", Code: "422"}, ErrTaskTerminal, true},
		{&APIError{Status: 400, Code: "invalid_task_status"}, ErrTaskTerminal, true},
		{&APIError{Status: 422, Type: "invalid_request_error"}, ErrTaskTerminal, false},
		{&APIError{Status: 404}, ErrTaskNotFound, true},
		{&APIError{Status: 410}, ErrTaskNotFound, false},
		{&APIError{Status: 401}, ErrUnauthorized, true},
		{&APIError{Status: 403}, ErrUnauthorized, true},
		{&APIError{Status: 500}, ErrAmbiguous, false},
		{&APIError{Status: 433}, ErrQuotaExhausted, true},
		{&APIError{Status: 429}, ErrQuotaExhausted, false},
		{&APIError{Status: 433, Code: "10007"}, ErrConcurrencyConflict, true},
		{&APIError{Status: 433, Code: "10007"}, ErrQuotaExhausted, false},
		{&APIError{Status: 433, Message: "Concurrency conflict for request"}, ErrConcurrencyConflict, true},
		{&APIError{Status: 433, Message: "Concurrency conflict for request"}, ErrQuotaExhausted, false},
		{&APIError{Status: 433, Message: "too many concurrent tasks"}, ErrConcurrencyConflict, true},
		{&APIError{Status: 433, Code: "quota_exhausted", Message: "one run per model per day"}, ErrConcurrencyConflict, false},
		{&APIError{Status: 433, Code: "quota_exhausted", Message: "one run per model per day"}, ErrQuotaExhausted, true},
		{&APIError{Status: 429, Code: "10007"}, ErrConcurrencyConflict, false},
		{&APIError{Status: 200, Code: "10007"}, ErrConcurrencyConflict, false},
	}
	for _, tt := range tests {
		if got := errors.Is(fmt.Errorf("wrapped: %w", tt.err), tt.target); got != tt.want {
			t.Errorf("errors.Is(%+v, %v) = %v", tt.err, tt.target, got)
		}
	}
	e := &APIError{Status: 400, Type: "invalid_request_error", Code: "invalid_parameter", Param: "input.text", Message: "is required", RequestID: "r"}
	if want := "apiclient: upstream answered HTTP 400 invalid_request_error (code invalid_parameter) param input.text: is required [request_id r]"; e.Error() != want {
		t.Errorf("Error() = %q", e.Error())
	}
}
