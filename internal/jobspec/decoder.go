package jobspec

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/suggest"
)

// decoder turns the raw JSON of a spec into typed values one field at a time,
// so that it can name the path of every unknown field, duplicate field and
// wrongly typed value, and carry on after each. The document has already
// passed json.Valid, so the standard library never sees a syntax error here.
type decoder struct {
	problems
}

// jsonType is the type of a JSON value as its first byte tells it.
type jsonType int

const (
	jsonNull jsonType = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

var jsonTypeNames = [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}

func typeOf(raw json.RawMessage) jsonType {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return jsonNull
	}
	switch raw[0] {
	case '{':
		return jsonObject
	case '[':
		return jsonArray
	case '"':
		return jsonString
	case 't', 'f':
		return jsonBool
	case 'n':
		return jsonNull
	default:
		return jsonNumber
	}
}

// want reports whether raw has type t, and a problem naming both types when
// it does not.
func (d *decoder) want(path string, raw json.RawMessage, t jsonType) bool {
	got := typeOf(raw)
	if got == t {
		return true
	}
	d.add(path, "must be "+jsonTypeNames[t]+", got "+jsonTypeNames[got])
	return false
}

// member is one name/value pair of a JSON object, in document order.
type member struct {
	name string
	raw  json.RawMessage
}

// members returns the members of the object raw, reporting duplicates
// (which are dropped) and a value that is not an object. raw is part of a
// document that passed json.Valid, so it is scanned rather than decoded:
// each value is the slice of raw it spans, and each name is read as
// json.Decoder would return it (see unquote).
func (d *decoder) members(path string, raw json.RawMessage) ([]member, bool) {
	if !d.want(path, raw, jsonObject) {
		return nil, false
	}
	var out []member
	i := skipSpace(raw, 0) + 1 // past the opening brace
	for {
		i = skipSpace(raw, i)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
		if i >= len(raw) || raw[i] != '"' {
			break // the closing brace (the document is valid JSON)
		}
		end := stringEnd(raw, i)
		name, ok := unquote(raw[i:end])
		if !ok {
			d.add(path, "malformed JSON object")
			return out, false
		}
		i = skipSpace(raw, end) + 1 // past the colon
		i = skipSpace(raw, i)
		vend := valueEnd(raw, i)
		v := raw[i:vend:vend]
		i = vend
		if slices.ContainsFunc(out, func(m member) bool { return m.name == name }) {
			d.add(field(path, name), "duplicate field")
			continue
		}
		out = append(out, member{name: name, raw: v})
	}
	return out, true
}

// unquote is the value of the JSON string q (with its quotes), as
// json.Unmarshal gives it. q comes from a document that passed json.Valid:
// without an escape, and in valid UTF-8 (which Unmarshal would repair),
// its value is its bytes between the quotes.
func unquote(q []byte) (string, bool) {
	if len(q) >= 2 {
		inner := q[1 : len(q)-1]
		if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
			return string(inner), true
		}
	}
	var v string
	if err := json.Unmarshal(q, &v); err != nil {
		return "", false
	}
	return v, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd is the index just past the JSON string starting at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// valueEnd is the index just past the JSON value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}

// fieldFunc decodes the value of one known field found at path.
type fieldFunc func(path string, raw json.RawMessage)

// object decodes the object raw: each member named in fields goes to its
// function, any other member is an unknown field. It reports false when raw
// is not an object.
func (d *decoder) object(path string, raw json.RawMessage, fields map[string]fieldFunc) bool {
	ms, ok := d.members(path, raw)
	if !ok {
		return false
	}
	for _, m := range ms {
		fn, known := fields[m.name]
		if !known {
			d.add(field(path, m.name), "unknown field"+suggest.Hint(m.name, slices.Sorted(maps.Keys(fields))))
			continue
		}
		fn(field(path, m.name), m.raw)
	}
	return true
}

// array returns the elements of the array raw.
func (d *decoder) array(path string, raw json.RawMessage) ([]json.RawMessage, bool) {
	if !d.want(path, raw, jsonArray) {
		return nil, false
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		d.add(path, "malformed JSON array")
		return nil, false
	}
	return elems, true
}

// str decodes a string into dst.
func (d *decoder) str(path string, raw json.RawMessage, dst *string) bool {
	if !d.want(path, raw, jsonString) {
		return false
	}
	v, ok := unquote(bytes.TrimSpace(raw))
	if !ok {
		d.add(path, "malformed JSON string")
		return false
	}
	*dst = v
	return true
}

// optStr decodes an optional string that, when present, must not be empty:
// an empty string would silently mean "absent" after decoding.
func (d *decoder) optStr(path string, raw json.RawMessage, dst *string) {
	if d.str(path, raw, dst) && *dst == "" {
		d.add(path, "must not be empty when given")
	}
}

// boolean decodes a boolean into dst.
func (d *decoder) boolean(path string, raw json.RawMessage, dst *bool) bool {
	if !d.want(path, raw, jsonBool) {
		return false
	}
	*dst = bytes.HasPrefix(bytes.TrimLeft(raw, " \t\r\n"), []byte("true"))
	return true
}

// boolPtr decodes a boolean into a freshly allocated *bool.
func (d *decoder) boolPtr(path string, raw json.RawMessage, dst **bool) {
	var b bool
	if d.boolean(path, raw, &b) {
		*dst = &b
	}
}

// integer decodes a JSON number with an integral value in [lo, hi] into
// dst; rule is the problem reported otherwise. Like JSON Schema's "integer",
// it accepts 5, 5.0 and 5e0 alike, and rejects 5.5 and "5".
func (d *decoder) integer(path string, raw json.RawMessage, dst *int, lo, hi int64, rule string) bool {
	if typeOf(raw) != jsonNumber {
		d.add(path, rule+", got "+jsonTypeNames[typeOf(raw)])
		return false
	}
	n, ok := Integer(raw, lo, hi)
	if !ok {
		d.add(path, rule)
		return false
	}
	*dst = n
	return true
}

// Integer reads raw as validation reads an integer field: a JSON number
// that is an integer, however written (1, 1.0, 1e0), from lo to hi.
// Whoever reads a field of a spec before it is validated (admission reads
// the priority) reads it with this, so that both agree.
func Integer(raw json.RawMessage, lo, hi int64) (int, bool) {
	if typeOf(raw) != jsonNumber {
		return 0, false
	}
	n, ok := parseInteger(string(bytes.TrimSpace(raw)))
	if !ok || n < lo || n > hi {
		return 0, false
	}
	return int(n), true
}

// intPtr is integer into a freshly allocated *int.
func (d *decoder) intPtr(path string, raw json.RawMessage, dst **int, lo, hi int64, rule string) {
	var n int
	if d.integer(path, raw, &n, lo, hi, rule) {
		*dst = &n
	}
}

// stringMap decodes an object of strings. An empty object gives a nil map;
// a member whose value is not a string is kept with an empty value, so that
// rules about which keys are present do not report it a second time.
func (d *decoder) stringMap(path string, raw json.RawMessage) (map[string]string, bool) {
	ms, ok := d.members(path, raw)
	if !ok {
		return nil, false
	}
	var out map[string]string
	for _, m := range ms {
		var v string
		d.str(field(path, m.name), m.raw, &v)
		if out == nil {
			out = make(map[string]string, len(ms))
		}
		out[m.name] = v
	}
	return out, true
}

// maxExactInt bounds the integers parseInteger returns (2^53), so every
// accepted value is also exact as a float64 in other languages' decoders.
const maxExactInt = 1 << 53

// parseInteger returns the value of the JSON number literal s when it is an
// integer within ±2^53. It works on the decimal digits, never on a float, so
// "5.0000000000000000001" is rightly not an integer, and it never expands an
// exponent like 1e999999999.
func parseInteger(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			// An exponent beyond int range: the value is 0 or enormous.
			return 0, onlyZeros(mant)
		}
		exp = e
	}
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		if exp < -maxDigitsExp || exp > maxDigitsExp {
			return 0, onlyZeros(digits)
		}
		exp -= len(mant) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return 0, true
	}
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	if exp < 0 || len(digits)+exp > 16 {
		return 0, false
	}
	n, err := strconv.ParseInt(digits+strings.Repeat("0", exp), 10, 64)
	if err != nil || n > maxExactInt {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// maxDigitsExp keeps exponent arithmetic far from int overflow; a 1 MiB
// document cannot hold more digits than this.
const maxDigitsExp = 1 << 30

func onlyZeros(s string) bool {
	return strings.Trim(s, "0.") == ""
}
