package jobclient

import (
	"bytes"
	"encoding/json"
	"net/url"
	"strings"
)

// ScrubServerURLs returns a comma-separated NATS server list without the
// user information (user, password or token) of any of its URLs.
func ScrubServerURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		parts[i] = scrubServerURL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func scrubServerURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme, rest = "", s
	}
	authority, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		authority = authority[at+1:]
	}
	out := authority
	if scheme != "" {
		out = scheme + "://" + out
	}
	if path != "" {
		out += "/" + path
	}
	return out
}

// ScrubURL returns u as scheme://host/path: without user information, query
// string or fragment (where a signed URL carries its signature). The rest
// is kept as written. A data: URI comes back as "data:...", and a string that
// does not parse as a URL with a scheme as "[unprintable URL]".
func ScrubURL(u string) string {
	if u == "" {
		return ""
	}
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" {
		return "[unprintable URL]"
	}
	if p.Opaque != "" || !strings.Contains(u, "://") {
		return p.Scheme + ":..."
	}
	u, _, _ = strings.Cut(u, "#")
	u, _, _ = strings.Cut(u, "?")
	return scrubServerURL(u)
}

// scrubEventJSON returns an event with the source and url of every
// artifact passed through ScrubURL. An event that needs no change comes
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
			if clean := ScrubURL(s); clean != s {
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
