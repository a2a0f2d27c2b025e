package jobspec

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readExample returns testdata/examples/<name>.json.
func readExample(t *testing.T, name string) []byte {
	t.Helper()
	data, err := readExampleFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// exampleNames lists testdata/examples/*.json without the extension.
func exampleNames(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "examples", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = strings.TrimSuffix(filepath.Base(p), ".json")
	}
	slices.Sort(names)
	return names
}

// assertJSON fails unless got marshals to the same JSON value as want.
func assertJSON(t *testing.T, got any, want string) {
	t.Helper()
	gotJSON, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(gotJSON, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("bad want JSON: %v", err)
	}
	if !reflect.DeepEqual(g, w) {
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, gotJSON, "", "  ")
		t.Errorf("JSON differs\n got: %s\nwant: %s", pretty.String(), want)
	}
}

// edit changes one value of a JSON document: path is dot-separated with
// [n] indexes ("video.input.media[0].url"); del removes the member.
type edit struct {
	path  string
	value any
	del   bool
}

func set(path string, value any) edit { return edit{path: path, value: value} }
func del(path string) edit            { return edit{path: path, del: true} }

var pathToken = regexp.MustCompile(`[^.\[\]]+|\[\d+\]`)

// mutate applies edits to the JSON document base and returns the result.
// A value of type json.RawMessage is inserted verbatim. It panics on a path
// that does not fit the document: that is a bug in the test table.
func mutate(base string, edits ...edit) string {
	var doc any
	if err := json.Unmarshal([]byte(base), &doc); err != nil {
		panic(err)
	}
	for _, e := range edits {
		tokens := pathToken.FindAllString(e.path, -1)
		doc = apply(doc, tokens, e)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		panic(err)
	}
	return string(out)
}

func apply(node any, tokens []string, e edit) any {
	tok := tokens[0]
	last := len(tokens) == 1
	if strings.HasPrefix(tok, "[") {
		arr := node.([]any)
		i, _ := strconv.Atoi(strings.Trim(tok, "[]"))
		if last {
			arr[i] = e.value
			return arr
		}
		arr[i] = apply(arr[i], tokens[1:], e)
		return arr
	}
	obj, ok := node.(map[string]any)
	if !ok || obj == nil {
		obj = map[string]any{}
	}
	switch {
	case last && e.del:
		delete(obj, tok)
	case last:
		obj[tok] = e.value
	default:
		obj[tok] = apply(obj[tok], tokens[1:], e)
	}
	return obj
}
