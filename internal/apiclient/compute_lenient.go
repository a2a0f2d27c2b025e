package apiclient

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// The compute platform documents most values as strings but its schedulers
// are free-form: a code may arrive as 0 instead of "0", an exit code as 3
// instead of "3", a count as "4" instead of 4. The wire types of
// compute_types.go therefore decode leniently, field by field, through
// decodeLenient below, while keeping their plain Go field types:
//
//   - string fields accept a string, a number (kept as written), a boolean
//     ("true"/"false"), null (""), or an object/array (kept as compact JSON
//     text);
//   - *string fields are nil for null, otherwise as string fields;
//   - int64 fields accept a number (a fraction is truncated), a numeric
//     string, "" or null (0); anything else is an error naming the field;
//   - map[string]string fields accept an object whose values are decoded as
//     string fields (null is nil);
//   - nested structs and slices of structs are decoded the same way;
//   - json.RawMessage fields keep the raw value (nil for null);
//   - unknown fields are ignored; names match exactly, then case-insensitively
//     like encoding/json.

// UnmarshalJSON decodes an envelope leniently (a numeric code is accepted).
func (e *Envelope) UnmarshalJSON(b []byte) error { return decodeLenient(b, e) }

// UnmarshalJSON decodes a token entry leniently (a numeric clusterId is
// accepted).
func (t *TokenEntry) UnmarshalJSON(b []byte) error { return decodeLenient(b, t) }

// UnmarshalJSON decodes center information leniently.
func (c *Center) UnmarshalJSON(b []byte) error { return decodeLenient(b, c) }

// UnmarshalJSON decodes a cluster user leniently.
func (u *ClusterUserInfo) UnmarshalJSON(b []byte) error { return decodeLenient(b, u) }

// UnmarshalJSON decodes a service address leniently (enable may be a JSON
// boolean).
func (s *ServiceURL) UnmarshalJSON(b []byte) error { return decodeLenient(b, s) }

// UnmarshalJSON decodes a cluster entry leniently (the id may be a numeric
// string).
func (c *Cluster) UnmarshalJSON(b []byte) error { return decodeLenient(b, c) }

// UnmarshalJSON decodes a queue entry leniently (numbers where strings are
// documented are accepted).
func (q *Queue) UnmarshalJSON(b []byte) error { return decodeLenient(b, q) }

// UnmarshalJSON decodes a job detail leniently: numbers where strings are
// documented (exitCode, jobStatus, ...) and strings where integers are
// documented (procNumUsed, ...) are accepted.
func (d *JobDetail) UnmarshalJSON(b []byte) error { return decodeLenient(b, d) }

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// decodeLenient decodes the JSON object b into the struct dst points to,
// following the rules at the top of this file. null leaves dst unchanged.
func decodeLenient(b []byte, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("decodeLenient: want pointer to struct, got %T", dst)
	}
	return decodeStruct(b, rv.Elem())
}

func decodeStruct(b []byte, sv reflect.Value) error {
	if isNull(b) {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decode %s: %w", sv.Type().Name(), err)
	}
	st := sv.Type()
	for i := range st.NumField() {
		f := st.Field(i)
		if !f.IsExported() {
			continue
		}
		name := jsonName(f)
		if name == "-" {
			continue
		}
		msg, ok := lookupField(raw, name)
		if !ok {
			continue
		}
		if err := setLenient(sv.Field(i), msg); err != nil {
			return fmt.Errorf("decode %s.%s: %w", st.Name(), name, err)
		}
	}
	return nil
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}

func lookupField(raw map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	if m, ok := raw[name]; ok {
		return m, true
	}
	for k, m := range raw {
		if strings.EqualFold(k, name) {
			return m, true
		}
	}
	return nil, false
}

func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

func setLenient(v reflect.Value, msg json.RawMessage) error {
	if v.Type() == rawMessageType {
		if isNull(msg) {
			v.SetBytes(nil)
			return nil
		}
		v.SetBytes(bytes.Clone(bytes.TrimSpace(msg)))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		s, err := lenientString(msg)
		if err != nil {
			return err
		}
		v.SetString(s)
		return nil
	case reflect.Int64, reflect.Int, reflect.Int32:
		n, err := lenientInt(msg)
		if err != nil {
			return err
		}
		if v.OverflowInt(n) {
			return fmt.Errorf("integer %d out of range", n)
		}
		v.SetInt(n)
		return nil
	case reflect.Pointer:
		if isNull(msg) {
			v.SetZero()
			return nil
		}
		p := reflect.New(v.Type().Elem())
		if err := setLenient(p.Elem(), msg); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String || v.Type().Elem().Kind() != reflect.String {
			break
		}
		if isNull(msg) {
			v.SetZero()
			return nil
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(msg, &raw); err != nil {
			return fmt.Errorf("want object: %w", err)
		}
		m := reflect.MakeMapWithSize(v.Type(), len(raw))
		for k, elem := range raw {
			s, err := lenientString(elem)
			if err != nil {
				return fmt.Errorf("key %q: %w", k, err)
			}
			m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), reflect.ValueOf(s).Convert(v.Type().Elem()))
		}
		v.Set(m)
		return nil
	case reflect.Struct:
		return decodeStruct(msg, v)
	case reflect.Slice:
		if isNull(msg) {
			v.SetZero()
			return nil
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(msg, &elems); err != nil {
			return fmt.Errorf("want array: %w", err)
		}
		s := reflect.MakeSlice(v.Type(), len(elems), len(elems))
		for i, elem := range elems {
			if err := setLenient(s.Index(i), elem); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
		v.Set(s)
		return nil
	}
	// Anything else (bool, float, map[string]any, ...) decodes strictly.
	return json.Unmarshal(msg, v.Addr().Interface())
}

// lenientString renders a JSON value as the string a string field holds.
func lenientString(msg json.RawMessage) (string, error) {
	msg = bytes.TrimSpace(msg)
	if len(msg) == 0 {
		return "", fmt.Errorf("empty value")
	}
	switch msg[0] {
	case '"':
		var s string
		if err := json.Unmarshal(msg, &s); err != nil {
			return "", err
		}
		return s, nil
	case 'n':
		if isNull(msg) {
			return "", nil
		}
	case 't', 'f':
		var b bool
		if err := json.Unmarshal(msg, &b); err != nil {
			return "", err
		}
		return strconv.FormatBool(b), nil
	case '{', '[':
		var buf bytes.Buffer
		if err := json.Compact(&buf, msg); err != nil {
			return "", err
		}
		return buf.String(), nil
	default:
		var n json.Number
		if err := json.Unmarshal(msg, &n); err != nil {
			return "", err
		}
		return n.String(), nil
	}
	return "", fmt.Errorf("invalid value %.20q", msg)
}

// lenientInt reads a JSON number or numeric string; null and "" are 0.
func lenientInt(msg json.RawMessage) (int64, error) {
	msg = bytes.TrimSpace(msg)
	if isNull(msg) {
		return 0, nil
	}
	var text string
	if len(msg) > 0 && msg[0] == '"' {
		if err := json.Unmarshal(msg, &text); err != nil {
			return 0, err
		}
		text = strings.TrimSpace(text)
		if text == "" {
			return 0, nil
		}
	} else {
		var n json.Number
		if err := json.Unmarshal(msg, &n); err != nil {
			return 0, fmt.Errorf("want integer: %w", err)
		}
		text = n.String()
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != f || f > 9.2e18 || f < -9.2e18 {
		return 0, fmt.Errorf("want integer, got %.20q", text)
	}
	return int64(f), nil
}
