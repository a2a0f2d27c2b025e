package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaDir is the directory of the published JSON Schemas (docs/schema).
func SchemaDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "docs", "schema")
}

// EventSchema compiles docs/schema/event.schema.json. Unless strict, it is
// the schema subscribers are told to use, which accepts fields it does not
// describe. strict also refuses those, on the event and on each object of
// its $defs (data, upstream, artifact, error): the project's own tests use
// it so that sluice publishes nothing its schema does not document.
func EventSchema(t testing.TB, strict bool) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join(SchemaDir(), "event.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("event.schema.json: %v", err)
	}
	url := "https://github.com/sluice-dev/sluice/docs/schema/event.schema.json"
	if strict {
		root := doc.(map[string]any)
		closeObject(root)
		for _, def := range root["$defs"].(map[string]any) {
			closeObject(def.(map[string]any))
		}
		url = "https://github.com/sluice-dev/sluice/docs/schema/event.strict.schema.json"
		root["$id"] = url
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile event.schema.json: %v", err)
	}
	return sch
}

// closeObject refuses properties an object schema does not list.
func closeObject(s map[string]any) {
	if _, ok := s["properties"]; ok {
		if _, set := s["additionalProperties"]; !set {
			s["additionalProperties"] = false
		}
	}
}
