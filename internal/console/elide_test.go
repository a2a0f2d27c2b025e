package console

import (
	"strings"
	"testing"
)

func TestElideSpec(t *testing.T) {
	t.Parallel()
	long := "data:image/png;base64," + strings.Repeat("A", 5000)
	got := elideSpec([]byte(`{"id":"a","video":{"input":{"media":[{"url":"` + long + `"}],"prompt":"short"}}}`))
	if strings.Contains(got, strings.Repeat("A", 200)) || !strings.Contains(got, "more bytes elided") || !strings.Contains(got, `"prompt": "short"`) {
		t.Errorf("elided spec:\n%s", got)
	}
	if got := elideSpec([]byte("not json " + strings.Repeat("x", 3000))); len(got) > 2100 || !strings.Contains(got, "elided") {
		t.Errorf("non-JSON: %d bytes", len(got))
	}
	got = elideSpec([]byte(`{"url":"https://bucket.example.test/in.png?X-Amz-Signature=abc123"}`))
	if strings.Contains(got, "abc123") || !strings.Contains(got, "https://bucket.example.test/in.png") {
		t.Errorf("presigned input URL shown as %s", got)
	}
	if got := elideSpec([]byte(`{"n":12345678901234567890}`)); !strings.Contains(got, "12345678901234567890") {
		t.Errorf("numbers changed: %s", got)
	}
}
