package artifacts

import (
	"path"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Limits of the parts of an object key.
const (
	// MaxPrefixBytes bounds the store's key prefix.
	MaxPrefixBytes = 256
	// MaxOutputPrefixBytes bounds a job's output.prefix
	// (docs/job-spec.md#fields-and-rules).
	MaxOutputPrefixBytes = 512
	// MaxFileNameBytes bounds a sanitized artifact file name.
	MaxFileNameBytes = 100
	// maxKeyBytes is S3's limit on the length of a key.
	maxKeyBytes = 1024
)

// jobIDRE is the job id rule (docs/job-spec.md#fields-and-rules).
var jobIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// Key returns the object key of an artifact (docs/artifacts.md):
// <prefix>/<outputPrefix>/<kind>/<jobID>/<file>, the outputPrefix part only
// when not empty. outputPrefix must be a relative key prefix (no leading
// "/", no empty or ".." segment, no control character, valid UTF-8, at most
// 512 bytes); kind a plain name; jobID a contract job id. file is reduced
// by SanitizeFileName, so an upstream-derived name is safe to pass. The
// result always starts with the store's prefix and "/". Errors wrap
// ErrInvalidArgument and name the offending part.
func (s *Store) Key(outputPrefix string, kind, jobID, file string) (string, error) {
	return buildKey(s.prefix, outputPrefix, kind, jobID, file)
}

// buildKey is Key without a Store.
func buildKey(prefix, outputPrefix, kind, jobID, file string) (string, error) {
	if outputPrefix != "" {
		if err := checkRelPath("output.prefix", outputPrefix, MaxOutputPrefixBytes); err != nil {
			return "", err
		}
	}
	if !isSafeName(kind) {
		return "", invalidf("kind", "%q is not a plain name ([A-Za-z0-9._-], not . or ..)", printable(kind))
	}
	if !jobIDRE.MatchString(jobID) {
		return "", invalidf("job_id", "%q does not match %s", printable(jobID), jobIDRE)
	}
	name := SanitizeFileName(file)
	if name == "" {
		return "", invalidf("file", "%q has no file name", printable(file))
	}
	parts := []string{prefix}
	if outputPrefix != "" {
		parts = append(parts, outputPrefix)
	}
	key := strings.Join(append(parts, kind, jobID, name), "/")
	if len(key) > maxKeyBytes {
		return "", invalidf("key", "%d bytes, more than S3's %d", len(key), maxKeyBytes)
	}
	return key, nil
}

// checkRelPath validates a relative, slash-separated key prefix.
func checkRelPath(field, p string, maxBytes int) error {
	switch {
	case p == "":
		return invalidf(field, "empty")
	case len(p) > maxBytes:
		return invalidf(field, "%d bytes, more than %d", len(p), maxBytes)
	case !utf8.ValidString(p):
		return invalidf(field, "not valid UTF-8")
	case hasControl(p):
		return invalidf(field, "%q contains a control character", printable(p))
	case strings.HasPrefix(p, "/"):
		return invalidf(field, "%q starts with /", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		switch seg {
		case "":
			return invalidf(field, "%q has an empty segment", p)
		case "..":
			return invalidf(field, "%q has a .. segment", p)
		}
	}
	return nil
}

// hasControl reports whether s holds a C0 or C1 control character or DEL.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return true
		}
	}
	return false
}

// printable makes s safe to quote in an error: invalid UTF-8 is replaced
// and the text is cut to 128 bytes.
func printable(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 128 {
		cut := 128
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// isSafeByte reports whether c is in the file name charset [A-Za-z0-9._-].
func isSafeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// isSafeName reports whether s is a non-empty name of at most
// MaxFileNameBytes from the safe charset that is not "." or "..".
func isSafeName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > MaxFileNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isSafeByte(s[i]) {
			return false
		}
	}
	return true
}

// SanitizeFileName turns an upstream-derived name into a safe artifact file
// name: the part after the last "/" or "\", every character outside
// [A-Za-z0-9._-] replaced by "_", "." and ".." turned into underscores, and
// at most MaxFileNameBytes bytes (the extension kept when short). It
// returns "" when nothing is left (an empty name or one ending in a
// separator).
func SanitizeFileName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "" {
		return ""
	}
	var b strings.Builder
	b.Grow(min(len(name), MaxFileNameBytes+8))
	for _, r := range name {
		if r < utf8.RuneSelf && isSafeByte(byte(r)) {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
		if b.Len() > 4*MaxFileNameBytes {
			break // enough to cut from; the rest cannot survive the cut
		}
	}
	s := b.String()
	if s == "." || s == ".." {
		return strings.Repeat("_", len(s))
	}
	if len(s) > MaxFileNameBytes {
		ext := path.Ext(s)
		if len(ext) > 16 {
			ext = ""
		}
		s = s[:MaxFileNameBytes-len(ext)] + ext
	}
	return s
}
