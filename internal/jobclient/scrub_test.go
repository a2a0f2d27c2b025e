package jobclient

import (
	"strings"
	"testing"
)

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
