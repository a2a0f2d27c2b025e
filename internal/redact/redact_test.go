package redact_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/redact"
)

func TestURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"s3://media/sluice/video/a/result-0.mp4", "s3://media/sluice/video/a/result-0.mp4"},
		{"https://cdn.example.test/out/abc.mp4?X-Amz-Signature=SECRET&X-Amz-Credential=AKIA", "https://cdn.example.test/out/abc.mp4"},
		{"https://user:SECRET@host.test/p#frag", "https://host.test/p"},
		{"https://user:SECRET@host.test", "https://host.test"},
		{"https://user:SECRET@host.test/a%20b.mp4#frag", "https://host.test/a%20b.mp4"},
		{"http://host.test:8080/a%20b", "http://host.test:8080/a%20b"},
		{"HTTPS://Host.test/X?sig=SECRET", "HTTPS://Host.test/X"},
		{"https://host.test/?", "https://host.test/"},
		{"https://[::1]:9000/b/k?sig=SECRET", "https://[::1]:9000/b/k"},
		{"data:image/png;base64,AAAA", "data:..."},
		{"mailto:SECRET@x", "mailto:..."},
		{"s3:/bucket/SECRET", "s3:..."},
		{"not a url", redact.Unparseable},
		{"host.test/x?sig=SECRET", redact.Unparseable},
		{"https://host.test/%zz?sig=SECRET", redact.Unparseable},
		{"https://u:SE%zzCRET@host.test/", redact.Unparseable},
		{"https://host.test/a\nb", redact.Unparseable},
	}
	for _, tt := range tests {
		got := redact.URL(tt.in)
		if got != tt.want {
			t.Errorf("URL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(got, "SECRET") {
			t.Errorf("URL(%q) = %q keeps a secret", tt.in, got)
		}
	}
}

func TestServerURLs(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:SECRET@a:4222, tls://SECRET@b:4222", "nats://a:4222,tls://b:4222"},
		{"user:SECRET@host:4222", "host:4222"},
		{"nats://u:p@a:4222/x@y", "nats://a:4222/x@y"},
		{"nats://alice:SE%zzCRET@host:4222", "nats://host:4222"},
		{"nats://alice:SE?CR#ET@host:4222", "nats://host:4222"},
		{"nats://host:4222?token=SECRET#SECRET", "nats://host:4222"},
	}
	for _, tt := range tests {
		if got := redact.ServerURLs(tt.in); got != tt.want {
			t.Errorf("ServerURLs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestTextSecrets: a secret of real length is redacted wherever it
// occurs, glued to other text too; a short one only where it stands
// alone, so that upstream's words stay readable.
func TestTextSecrets(t *testing.T) {
	t.Parallel()
	const real = "sk-3f9a8b7c6d5e4f3a2b1c0d9e"
	tests := []struct{ name, in, secret, want string }{
		{"real key in text", "upstream: key " + real + " is not valid", real, "upstream: key [redacted] is not valid"},
		{"real key glued", "x" + real + "y and " + real + "." + real, real, "x[redacted]y and [redacted].[redacted]"},
		{"real key in a query", "GET /v1?k=" + real + "&x=1", real, "GET /v1?k=[redacted]&x=1"},
		{"one letter in a word", `{"code":"invalid_api_key"}`, "k", `{"code":"invalid_api_key"}`},
		{"one letter alone", "key k was refused (k)", "k", "key [redacted] was refused ([redacted])"},
		{"short key at the edges", "abc and abcd abc", "abc", "[redacted] and abcd [redacted]"},
		{"short key beside a dash", "sk-abc abc-1 x=abc", "abc", "sk-abc abc-1 x=[redacted]"},
		{"seven bytes, in a word", "tok1234567x", "1234567", "tok1234567x"},
		{"eight bytes, in a word", "tok12345678x", "12345678", "tok[redacted]x"},
	}
	for _, tt := range tests {
		if got := redact.Text(tt.in, tt.secret); got != tt.want {
			t.Errorf("%s: Text(%q, %q)\n got %q\nwant %q", tt.name, tt.in, tt.secret, got, tt.want)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	const key = "sk-live-abcdef"
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain message", "plain message"},
		{"bad key " + key + " given", "bad key [redacted] given"},
		{"header Authorization: Bearer eyJhbGciOi.x.y rejected", "header Authorization: [redacted] [redacted] rejected"},
		{"got Bearer abc.def", "got Bearer [redacted]"},
		{"cannot fetch https://b.s3.test/k.png?X-Amz-Signature=abc&X-Amz-Credential=AKIA now", "cannot fetch https://b.s3.test/k.png now"},
		{"see https://user:pw@host.test/x#frag", "see https://host.test/x"},
		{`parse "https://u:pw@cdn.test/a?sig=s&x=1": bad, see http://h.test/p#f`, `parse "https://cdn.test/a": bad, see http://h.test/p`},
		{`{"url":"https://h.test/x?sig=a\u0026b=c"}`, `{"url":"https://h.test/x"}`},
		{`{"token": "t0k3n", "n": 1}`, `{"token": "[redacted]", "n": 1}`},
		{"password=hunter2&x=1", "password=[redacted]&x=1"},
		{"image data:image/png;base64,iVBORw0KGgo= is too big", "image data:[omitted] is too big"},
		{"two\nlines\tand\x00nul", "two lines and nul"},
		{"bad \xff byte", "bad ? byte"},
		{"compute:/home/u/out.log", "compute:/home/u/out.log"},
		{strings.Repeat("é", 400), strings.Repeat("é", 400)},
	}
	for _, tt := range tests {
		if got := redact.Text(tt.in, key); got != tt.want {
			t.Errorf("Text(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func FuzzText(f *testing.F) {
	for _, s := range []string{
		"https://u:pw@h.test/p?sig=x#f",
		"Bearer abc",
		`{"api_key":"k"}`,
		"data:text/plain;base64,QUJD",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := redact.Text(s, "sk-fuzz-secret")
		if strings.Contains(got, "sk-fuzz-secret") {
			t.Fatalf("Text(%q) = %q keeps the secret", s, got)
		}
		if strings.ContainsFunc(got, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("Text(%q) = %q has a control character", s, got)
		}
		if again := redact.Text(got, "sk-fuzz-secret"); again != got {
			t.Fatalf("Text is not idempotent: %q then %q", got, again)
		}
	})
}

func ExampleURL() {
	fmt.Println(redact.URL("https://cdn.example.test/out/abc.mp4?X-Amz-Signature=0123abcd&X-Amz-Credential=AKIA"))
	// Output: https://cdn.example.test/out/abc.mp4
}

func ExampleText() {
	fmt.Println(redact.Text(`GET "https://user:pw@cdn.example.test/a.mp4?sig=0123": 403, api_key="sk-1"`))
	// Output: GET "https://cdn.example.test/a.mp4": 403, api_key="[redacted]"
}
