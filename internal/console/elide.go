package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/internal/redact"
)

// Strings longer than these are shortened in a shown spec: data URIs to
// their head, anything else to its start.
const (
	maxDataURI = 96
	maxString  = 2000
)

// elideSpec returns spec indented for reading, with long data URIs and
// very long strings shortened and the number of bytes left out said, and
// http(s) URLs without their query string and user information. A
// spec that is not JSON comes back as text, shortened the same way.
func elideSpec(spec []byte) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(spec))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return elideString(string(spec))
	}
	b, err := json.MarshalIndent(elide(v), "", "  ")
	if err != nil {
		return elideString(string(spec))
	}
	return string(b)
}

func elide(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = elide(e)
		}
	case []any:
		for i, e := range x {
			x[i] = elide(e)
		}
	case string:
		return elideString(x)
	}
	return v
}

func elideString(s string) string {
	switch {
	case strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://"):
		// A producer's input URL may be presigned: its query string is a
		// credential, and the console shows it to every reader.
		if r := redact.URL(s); r != s {
			return r + " (query string hidden)"
		}
	case strings.HasPrefix(s, "data:") && len(s) > maxDataURI:
		return fmt.Sprintf("%s… (%d more bytes elided)", s[:maxDataURI], len(s)-maxDataURI)
	case len(s) > maxString:
		return fmt.Sprintf("%s… (%d more bytes elided)", s[:maxString], len(s)-maxString)
	}
	return s
}
