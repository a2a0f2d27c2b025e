// Package redact makes URLs and free text safe to log, publish or put into
// an error: it removes URL user information, query strings and fragments
// (where presigned URLs carry their signatures), bearer tokens,
// credential-looking key/value pairs, base64 data URIs and any secret the
// caller names.
package redact

import (
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Unparseable replaces a string given to URL that is not a URL with a
// scheme: it may hold anything.
const Unparseable = "[unparseable URL]"

// URL returns u as scheme://host/path, without user information, query
// string or fragment; what is kept stays as written. A URL without an
// authority (data:, mailto:) comes back as its scheme and ":...", a string
// that does not parse as a URL with a scheme as Unparseable, and "" as "".
func URL(u string) string {
	if u == "" {
		return ""
	}
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" {
		return Unparseable
	}
	// url.Parse lower-cases the scheme, so its length locates the rest.
	rest, ok := strings.CutPrefix(u[len(p.Scheme)+1:], "//")
	if p.Opaque != "" || !ok {
		return p.Scheme + ":..."
	}
	rest, _, _ = strings.Cut(rest, "#")
	rest, _, _ = strings.Cut(rest, "?")
	return u[:len(p.Scheme)] + "://" + withoutUserinfo(rest)
}

// ServerURLs returns a comma-separated server list (NATS URLs, with or
// without a scheme) without the user information (user, password or
// token), query string or fragment of any of its URLs.
func ServerURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		scheme, rest, ok := strings.Cut(p, "://")
		if !ok {
			scheme, rest = "", p
		}
		// User information goes first: a password may hold '?' or '#'.
		rest = withoutUserinfo(rest)
		rest, _, _ = strings.Cut(rest, "#")
		rest, _, _ = strings.Cut(rest, "?")
		if ok {
			rest = scheme + "://" + rest
		}
		parts[i] = rest
	}
	return strings.Join(parts, ",")
}

// withoutUserinfo drops everything up to the last '@' of the authority
// (the part before the first '/') of authority[/path].
func withoutUserinfo(s string) string {
	authority, path, hasPath := strings.Cut(s, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	if hasPath {
		return authority + "/" + path
	}
	return authority
}

var (
	// urlInText finds URLs (any scheme) in text. A backslash does not end
	// one, so that a JSON-escaped query ("\u0026") goes with its URL.
	urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)
	// dataURI finds base64 data URIs, which are dropped whole.
	dataURI = regexp.MustCompile(`data:[^,\s"']*;base64,[A-Za-z0-9+/=_-]*`)
	// bearer finds bearer tokens echoed by a server or proxy.
	bearer = regexp.MustCompile(`(?i)(bearer\s+)[^\s"',;]+`)
	// credential finds credential-looking key=value or "key": "value"
	// pairs.
	credential = regexp.MustCompile(`(?i)((?:token|api[_-]?key|secret|password|signature|authorization|credential)["']?\s*[:=]\s*["']?)[^\s"',;&}]+`)
)

// The literal words of bearer and credential, for mayContainFold.
var (
	bearerWords     = []string{"bearer"}
	credentialWords = []string{"token", "api", "secret", "password", "signature", "authorization", "credential"}
)

// mayContainFold reports whether s may hold one of words (lower-case
// ASCII) under the case folding of a (?i) pattern. For ASCII text that is
// an ASCII case-insensitive search; other text may fold onto ASCII
// letters (U+212A KELVIN SIGN matches 'k', U+017F LONG S 's'), so it
// answers true and the pattern decides.
func mayContainFold(s string, words []string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, w := range words {
		if indexFoldASCII(s, w) >= 0 {
			return true
		}
	}
	return false
}

// indexFoldASCII is the index of the first match of lower-case ASCII word
// in ASCII s, ignoring case, or -1.
func indexFoldASCII(s, word string) int {
	for i := 0; i+len(word) <= len(s); i++ {
		j := 0
		for ; j < len(word); j++ {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != word[j] {
				break
			}
		}
		if j == len(word) {
			return i
		}
	}
	return -1
}

// Text returns s made safe to log: every secret given is replaced with
// "[redacted]" (one shorter than MinSecretAnywhere bytes only where it
// stands alone, see replaceSecret), base64 data URIs with "data:[omitted]", every URL in s
// goes through URL, bearer tokens and the values of credential-looking
// key/value pairs (token, api_key, secret, password, signature,
// authorization, credential) become "[redacted]", control characters
// become spaces, invalid UTF-8 becomes '?', and the result is trimmed. Its
// length is left alone.
func Text(s string, secrets ...string) string {
	return text(s, false, secrets)
}

// text is Text; everyPattern runs every pattern whether or not its
// literal part occurs, as a reference for the tests.
func text(s string, everyPattern bool, secrets []string) string {
	if s == "" {
		return ""
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	for _, sec := range secrets {
		s = replaceSecret(s, sec)
	}
	// Each pattern runs only where its literal part occurs: an artifact's
	// source URL goes through here for every job, and the two
	// case-insensitive patterns, which have no literal prefix to search
	// for, would otherwise try a match at every byte (2.7% of a worker's
	// CPU per job; BENCHMARKS.md, "The cost of a job").
	if everyPattern || strings.Contains(s, "data:") {
		s = dataURI.ReplaceAllString(s, "data:[omitted]")
	}
	if everyPattern || strings.Contains(s, "://") {
		s = urlInText.ReplaceAllStringFunc(s, URL)
	}
	if everyPattern || mayContainFold(s, bearerWords) {
		s = bearer.ReplaceAllString(s, "${1}[redacted]")
	}
	if everyPattern || mayContainFold(s, credentialWords) {
		s = credential.ReplaceAllString(s, "${1}[redacted]")
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// MinSecretAnywhere is the length from which Text replaces a secret
// wherever it occurs. A real API key, password or token is longer; a
// shorter one (a one-letter test key, a placeholder) replaced everywhere
// would mangle the words that contain it ("invalid_api_key" with the key
// "k"), so it is replaced only where it stands alone.
const MinSecretAnywhere = 8

// replaceSecret replaces sec in s with "[redacted]": everywhere when sec
// has at least MinSecretAnywhere bytes, else only where neither
// neighbour is a word byte (a letter, digit, '_' or '-').
func replaceSecret(s, sec string) string {
	if sec == "" {
		return s
	}
	if len(sec) >= MinSecretAnywhere {
		return strings.ReplaceAll(s, sec, "[redacted]")
	}
	var b strings.Builder
	for {
		i := strings.Index(s, sec)
		if i < 0 {
			break
		}
		end := i + len(sec)
		alone := (i == 0 || !isWordByte(s[i-1])) && (end == len(s) || !isWordByte(s[end]))
		b.WriteString(s[:i])
		if alone {
			b.WriteString("[redacted]")
		} else {
			b.WriteString(sec)
		}
		s = s[end:]
	}
	b.WriteString(s)
	return b.String()
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || ('0' <= c && c <= '9') || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}
