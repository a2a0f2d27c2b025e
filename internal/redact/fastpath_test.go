package redact

import "testing"

// textEveryPattern is Text as it was before its patterns ran only where
// their literal part occurs: every pattern on every string.
func textEveryPattern(s string, secrets ...string) string { return text(s, true, secrets) }

var fastPathSeeds = []string{
	"http://127.0.0.1:8080/v1/files/abc.mp4?sig=x",
	"https://cdn.test/TOKEN=abc/x?y",
	"BEARER xyz",
	"Authorization: Basic dXNlcjpwYXNz",
	"API-KEY: k",
	"Api_Key=v",
	"to\u212aen=kelvin",          // KELVIN SIGN folds onto 'k'
	"\u017fecret: long-s",        // LONG S folds onto 's'
	"pa\u017f\u017fword=x",       //
	"data:image/png;base64,QUJD", //
	"DATA:image/png;base64,QUJD", // case matters for data URIs
	"speech stream",
	"credentials = abc; signature:def",
}

func TestTextFastPathAgrees(t *testing.T) {
	t.Parallel()
	for _, s := range fastPathSeeds {
		if got, want := Text(s, "sk-1"), textEveryPattern(s, "sk-1"); got != want {
			t.Errorf("Text(%q) = %q, every pattern gives %q", s, got, want)
		}
	}
}

func FuzzTextFastPath(f *testing.F) {
	for _, s := range fastPathSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := Text(s), textEveryPattern(s); got != want {
			t.Fatalf("Text(%q) = %q, every pattern gives %q", s, got, want)
		}
	})
}

func BenchmarkTextURL(b *testing.B) {
	const u = "http://127.0.0.1:39391/v1/files/01JD8Z6Q2M3N4P5R6S7T8V9W0X/video.mp4?expires=1732492800&sig=0123456789abcdef"
	for b.Loop() {
		Text(u)
	}
}

func BenchmarkTextURLEveryPattern(b *testing.B) {
	const u = "http://127.0.0.1:39391/v1/files/01JD8Z6Q2M3N4P5R6S7T8V9W0X/video.mp4?expires=1732492800&sig=0123456789abcdef"
	for b.Loop() {
		textEveryPattern(u)
	}
}
