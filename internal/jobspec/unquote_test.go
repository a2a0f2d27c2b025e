package jobspec

import (
	"encoding/json"
	"testing"
)

// TestUnquoteMatchesUnmarshal checks the decoder's fast reading of JSON
// strings against the standard library's, escapes and broken UTF-8
// included.
func TestUnquoteMatchesUnmarshal(t *testing.T) {
	t.Parallel()
	for _, q := range []string{
		`""`, `"plain"`, `"a paper boat, job 1 [sim:duration=0s]"`, `"é ü 漢字 🎬"`,
		`"quote \" inside"`, `"back\\slash"`, `"\u00e9\n\t\/"`, `"\ud83c\udfac"`, `"\ud800"`,
		"\"broken \xff utf-8\"", "\"cut \xe6\xbc\"",
	} {
		var want string
		if err := json.Unmarshal([]byte(q), &want); err != nil {
			t.Fatalf("Unmarshal(%q): %v", q, err)
		}
		got, ok := unquote([]byte(q))
		if !ok || got != want {
			t.Errorf("unquote(%q) = %q, %v; json.Unmarshal gives %q", q, got, ok, want)
		}
	}
}
