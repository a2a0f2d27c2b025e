package jobclient

import (
	"bytes"
	"encoding/json"

	"github.com/sluice-dev/sluice/internal/redact"
)

// scrubEventJSON returns an event with the source and url of every
// artifact passed through redact.URL. An event that needs no change comes
// back byte for byte, so unknown fields and their order survive; so does
// anything that is not an event-shaped JSON object.
func scrubEventJSON(raw []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return raw
	}
	var data map[string]json.RawMessage
	if json.Unmarshal(top["data"], &data) != nil || data == nil {
		return raw
	}
	var arts []map[string]json.RawMessage
	if json.Unmarshal(data["artifacts"], &arts) != nil {
		return raw
	}
	changed := false
	for _, a := range arts {
		for _, k := range []string{"source", "url"} {
			var s string
			if json.Unmarshal(a[k], &s) != nil || s == "" {
				continue
			}
			if clean := redact.URL(s); clean != s {
				a[k] = marshalRaw(clean)
				changed = true
			}
		}
	}
	if !changed {
		return raw
	}
	data["artifacts"] = marshalRaw(arts)
	top["data"] = marshalRaw(data)
	return marshalRaw(top)
}

// marshalRaw encodes v without HTML escaping; v is always encodable here.
func marshalRaw(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimRight(b.Bytes(), "\n")
}
