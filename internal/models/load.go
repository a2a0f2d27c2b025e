package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/suggest"
)

// file is an operator's catalog file (docs/job-spec.md#the-model-catalog).
type file struct {
	// Replace drops the shipped catalog: the file is the whole catalog
	// and must have its own default.
	Replace bool `json:"replace"`
	// Default, when present, replaces the default entry.
	Default *Entry `json:"default"`
	// Models are added to the catalog; one it names already replaces
	// that entry whole.
	Models map[string]Entry `json:"models"`
}

// The shape of a catalog file: the fields each object may have ("*" any
// name), nil for a value whose inside is not checked here.
type shape map[string]shape

var (
	entryShape = shape{"resolutions": nil, "durations": {"min": nil, "max": nil}, "ratios": nil, "inputs": nil, "prices": {"*": nil}}
	fileShape  = shape{"replace": nil, "default": entryShape, "models": {"*": entryShape}}
)

// Load reads the operator's catalog file at path and returns the catalog
// in force: the shipped one extended by the file, or the file alone when it
// says "replace": true. An error names the file and, for a file that does
// not parse or names an unknown field, the line and column.
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model catalog: %w", err)
	}
	f, err := parseFile(data, path)
	if err != nil {
		return nil, err
	}
	c := Shipped()
	if f.Replace {
		if f.Default == nil {
			return nil, fmt.Errorf("model catalog %s: default: required when replace is true", path)
		}
		c = &Catalog{Models: map[string]Entry{}}
	}
	if f.Default != nil {
		c.Default = *f.Default
	}
	for name, e := range f.Models {
		// A file naming a shipped model in another case means that model.
		shipped, _, known := c.Lookup(name)
		if known {
			delete(c.Models, shipped)
		}
		c.Models[name] = e
	}
	return c, c.validate(path)
}

// parse reads a whole catalog (as the shipped one and the published one
// are written) and validates it.
func parse(data []byte, source string) (*Catalog, error) {
	var c Catalog
	if err := decodeStrict(data, source, shape{"default": entryShape, "models": {"*": entryShape}}, &c); err != nil {
		return nil, err
	}
	if c.Models == nil {
		c.Models = map[string]Entry{}
	}
	return &c, c.validate(source)
}

// parseFile reads an operator's file.
func parseFile(data []byte, source string) (*file, error) {
	var f file
	if err := decodeStrict(data, source, fileShape, &f); err != nil {
		return nil, err
	}
	return &f, nil
}

// validate checks every entry, naming the first broken field.
func (c *Catalog) validate(source string) error {
	if err := c.Default.validate("default"); err != nil {
		return fmt.Errorf("model catalog %s: %w", source, err)
	}
	names := slices.Sorted(maps.Keys(c.Models))
	for i, n := range names {
		path := fmt.Sprintf("models[%q]", n)
		if strings.TrimSpace(n) == "" {
			return fmt.Errorf("model catalog %s: %s: a model name must not be empty", source, path)
		}
		if j := slices.IndexFunc(names[:i], func(m string) bool { return strings.EqualFold(m, n) }); j >= 0 {
			return fmt.Errorf("model catalog %s: %s: repeats model %q (names match whatever their case)", source, path, names[j])
		}
		if err := c.Models[n].validate(path); err != nil {
			return fmt.Errorf("model catalog %s: %w", source, err)
		}
	}
	return nil
}

// decodeStrict decodes one JSON object into v, refusing a field the shape
// does not know, a value of the wrong type and data after the object, each
// error naming the line and column where it is.
func decodeStrict(data []byte, source string, sh shape, v any) error {
	at := func(off int64, format string, args ...any) error {
		line, col := position(data, off)
		return fmt.Errorf("model catalog %s: line %d, column %d: %s", source, line, col, fmt.Sprintf(format, args...))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	w := walker{dec: dec, data: data}
	if err := w.walk(sh, ""); err != nil {
		var syn *json.SyntaxError
		var uf *unknownField
		var no *notObject
		switch {
		case errors.As(err, &no):
			return at(w.skipSeparators(no.offset), "the catalog must be a JSON object")
		case errors.As(err, &uf):
			return at(uf.offset, "unknown field %q%s%s", uf.name, uf.where(), suggest.Hint(uf.name, uf.known))
		case errors.As(err, &syn):
			return at(syn.Offset, "not valid JSON: %v", syn)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return at(int64(len(data)), "not valid JSON: the file is cut short")
		}
		return at(dec.InputOffset(), "not valid JSON: %v", err)
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); err != io.EOF {
		return at(w.skipSeparators(end), "data after the JSON object")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return at(te.Offset, "%s: must be a JSON %s, not %s", te.Field, te.Type.Kind(), te.Value)
		}
		return fmt.Errorf("model catalog %s: %w", source, err)
	}
	return nil
}

// notObject is a catalog that is not a JSON object.
type notObject struct{ offset int64 }

func (e *notObject) Error() string { return "not a JSON object" }

// unknownField is a field the shape does not know, at offset.
type unknownField struct {
	name, parent string
	known        []string // the fields the shape has there
	offset       int64
}

func (e *unknownField) Error() string { return "unknown field " + e.name }

func (e *unknownField) where() string {
	if e.parent == "" {
		return ""
	}
	return " in " + e.parent
}

// walker reads a catalog token by token, to know where each field is.
type walker struct {
	dec  *json.Decoder
	data []byte
}

// walk reads one JSON value, checking every object's field names against
// sh; the top-level value must be an object.
func (w walker) walk(sh shape, path string) error {
	dec := w.dec
	start := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	switch {
	case path == "" && d != '{':
		return &notObject{offset: start}
	case !ok:
		return nil
	case d == '[':
		for dec.More() {
			if err := w.walk(nil, path+"[]"); err != nil {
				return err
			}
		}
	case d == '{':
		for dec.More() {
			before := dec.InputOffset()
			key, err := dec.Token()
			if err != nil {
				return err
			}
			name, _ := key.(string)
			child, known := sh[name]
			if !known {
				child, known = sh["*"]
			}
			if sh != nil && !known {
				return &unknownField{name: name, parent: strings.TrimPrefix(path, "."), known: slices.Sorted(maps.Keys(sh)), offset: w.skipSeparators(before)}
			}
			if err := w.walk(child, path+"."+name); err != nil {
				return err
			}
		}
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// skipSeparators returns the offset of the first byte at or after off
// that is not white space or a comma: where the next token starts.
func (w walker) skipSeparators(off int64) int64 {
	for off < int64(len(w.data)) && bytes.IndexByte([]byte(" \t\r\n,"), w.data[off]) >= 0 {
		off++
	}
	return off
}

// position turns a byte offset into a line and column, both from 1; the
// column counts bytes.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	prefix := data[:off]
	line = 1 + bytes.Count(prefix, []byte("\n"))
	col = int(off) - (bytes.LastIndexByte(prefix, '\n') + 1) + 1
	return line, col
}
