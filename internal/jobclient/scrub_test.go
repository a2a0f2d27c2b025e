package jobclient

import (
	"strings"
	"testing"
)

func TestScrubURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"s3://media/sluice/video/a/result-0.mp4", "s3://media/sluice/video/a/result-0.mp4"},
		{"https://cdn.example.test/out/a.mp4?X-Amz-Signature=abc&X-Amz-Credential=k", "https://cdn.example.test/out/a.mp4"},
		{"https://user:pw@cdn.example.test/a%20b.mp4#frag", "https://cdn.example.test/a%20b.mp4"},
		{"data:image/png;base64,AAAA", "data:..."},
		{"not a url", "[unprintable URL]"},
	}
	for _, tt := range tests {
		if got := ScrubURL(tt.in); got != tt.want {
			t.Errorf("ScrubURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestScrubServerURLs(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@a:4222, tls://token@b:4222", "nats://a:4222,tls://b:4222"},
		{"user:pw@host:4222", "host:4222"},
		{"nats://u:p@a:4222/x@y", "nats://a:4222/x@y"},
	}
	for _, tt := range tests {
		if got := ScrubServerURLs(tt.in); got != tt.want {
			t.Errorf("ScrubServerURLs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestScrubEventJSON(t *testing.T) {
	t.Parallel()
	clean := `{"id":"a.succeeded","data":{"job_id":"a","artifacts":[{"url":"s3://b/k","source":"https://cdn/x.mp4"}],"extra":1}}`
	if got := string(scrubEventJSON([]byte(clean))); got != clean {
		t.Errorf("a clean event changed: %s", got)
	}
	signed := strings.Replace(clean, "x.mp4", "x.mp4?sig=SECRET&a=<b>", 1)
	got := string(scrubEventJSON([]byte(signed)))
	if strings.Contains(got, "SECRET") || !strings.Contains(got, `"source":"https://cdn/x.mp4"`) || !strings.Contains(got, `"extra":1`) {
		t.Errorf("scrubbed event: %s", got)
	}
	for _, odd := range []string{"not json", `{"data":null}`, `{"data":{"artifacts":"x"}}`} {
		if got := string(scrubEventJSON([]byte(odd))); got != odd {
			t.Errorf("scrubEventJSON(%q) = %q", odd, got)
		}
	}
}
