package jobspec

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// The JSON Schema documents live in docs/schema, two levels up.
var schemaDir = filepath.Join("..", "..", "docs", "schema")

// compileSchema compiles docs/schema/<file> (draft 2020-12).
func compileSchema(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join(schemaDir, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	url := "https://github.com/sluice-dev/sluice/docs/schema/" + file
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compile %s: %v", file, err)
	}
	return sch
}

// schemaAccepts reports whether data parses as JSON and validates.
func schemaAccepts(sch *jsonschema.Schema, data []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// TestSchemaAcceptsExamples checks that every example satisfies both the
// schema and Decode.
func TestSchemaAcceptsExamples(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t, "jobspec.schema.json")
	for _, name := range exampleNames(t) {
		data := readExample(t, name)
		if err := schemaAccepts(sch, data); err != nil {
			t.Errorf("schema rejects example %s: %v", name, err)
		}
		if _, err := Decode(data, ""); err != nil {
			t.Errorf("Decode rejects example %s: %v", name, err)
		}
	}
}

// schemaCannotExpress names the invalid cases that only Go can reject, and
// why; every other invalid case must be rejected by the schema too.
var schemaCannotExpress = map[string]string{
	"duplicate field":                     "JSON Schema sees parsed objects: the duplicate is gone",
	"invalid UTF-8":                       "the JSON parser replaces invalid bytes",
	"kind differs from subject":           "the subject is not part of the document",
	"arrived for unknown kind":            "the subject is not part of the document",
	"label key 64 bytes in 32 characters": "maxLength counts characters, the rule counts bytes",
	"prompt of no-break spaces":           `\S in Go's regexp engine is ASCII-only`,
	"resolution unknown":                  "the model catalog decides, and an operator may extend it",
	"duration 3":                          "the model catalog decides, and an operator may extend it",
	"duration 16":                         "the model catalog decides, and an operator may extend it",
	"ratio unknown":                       "the model catalog decides, and an operator may extend it",
	"first frame with unlisted ratio":     "the model catalog decides, and an operator may extend it",
}

// TestSchemaRejectsInvalid runs the invalid-spec table through the schema:
// apart from schemaCannotExpress, whatever Go rejects the schema rejects.
func TestSchemaRejectsInvalid(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t, "jobspec.schema.json")
	for _, tt := range invalidCases(t) {
		err := schemaAccepts(sch, []byte(tt.doc))
		_, gap := schemaCannotExpress[tt.name]
		switch {
		case gap && err != nil:
			t.Errorf("schema rejects %q after all; take it off schemaCannotExpress: %v", tt.name, err)
		case !gap && err == nil:
			t.Errorf("schema accepts invalid case %q", tt.name)
		}
	}
}

// TestSchemaAndDecodeAgreeOnEdges checks valid edge documents against the
// schema as well.
func TestSchemaAndDecodeAgreeOnEdges(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t, "jobspec.schema.json")
	for _, tt := range validEdgeCases(t) {
		if err := schemaAccepts(sch, []byte(tt.doc)); err != nil {
			t.Errorf("%s: schema rejects a valid spec: %v", tt.name, err)
		}
	}
}

// TestEventSchema validates the sample events, rejects broken ones and
// accepts added fields (subscribers validate with it; events grow by
// adding fields), which only the project's strict variant refuses.
func TestEventSchema(t *testing.T) {
	t.Parallel()
	sch := testenv.EventSchema(t, false)
	strict := testenv.EventSchema(t, true)
	paths, err := filepath.Glob(filepath.Join(schemaDir, "examples", "event-*.json"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("event examples: %v %v", paths, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := schemaAccepts(sch, data); err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
		}
		if err := schemaAccepts(strict, data); err != nil {
			t.Errorf("%s: strict: %v", filepath.Base(p), err)
		}
	}

	failed, err := os.ReadFile(filepath.Join(schemaDir, "examples", "event-failed.json"))
	if err != nil {
		t.Fatal(err)
	}
	succeeded, err := os.ReadFile(filepath.Join(schemaDir, "examples", "event-succeeded.json"))
	if err != nil {
		t.Fatal(err)
	}
	broken := []struct {
		name string
		doc  string
	}{
		{"failed without error", mutate(string(failed), set("data.error", nil))},
		{"succeeded with error", mutate(string(succeeded), set("data.error", map[string]any{"code": "x", "message": "m", "stage": "poll"}))},
		{"unknown stage", mutate(string(failed), set("data.error.stage", "upload"))},
		{"type does not match status", mutate(string(failed), set("type", "sluice.job.succeeded"))},
		{"id does not end in status", mutate(string(failed), set("id", "clip-0002.succeeded"))},
		{"unknown status", mutate(string(failed), set("data.status", "done"))},
		{"wrong specversion", mutate(string(failed), set("specversion", "0.3"))},
		{"attempt zero", mutate(string(failed), set("data.attempt", 0))},
		{"labels missing", mutate(string(failed), del("data.labels"))},
		{"bad sha256", mutate(string(succeeded), set("data.artifacts[0].sha256", "XYZ"))},
		{"artifact url not s3", mutate(string(succeeded), set("data.artifacts[0].url", "https://x/y"))},
		{"compute field on video", mutate(string(succeeded), set("data.upstream.cluster_id", "c"))},
		{"usage a string", mutate(string(succeeded), set("data.usage", "1"))},
		{"priority 6", mutate(string(succeeded), set("data.priority", 6))},
		{"tenant not an id", mutate(string(succeeded), set("data.tenant", "a b"))},
		{"cost negative", mutate(string(succeeded), set("data.cost", -1))},
		{"time without zone", mutate(string(succeeded), set("time", "2026-11-22T10:00:05"))},
	}
	for _, tt := range broken {
		if err := schemaAccepts(sch, []byte(tt.doc)); err == nil {
			t.Errorf("%s: schema accepts", tt.name)
		}
	}

	added := []struct {
		name string
		doc  string
	}{
		{"event field", mutate(string(succeeded), set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))},
		{"data field", mutate(string(succeeded), set("data.region", "eu"))},
		{"upstream field", mutate(string(succeeded), set("data.upstream.region", "eu"))},
		{"artifact field", mutate(string(succeeded), set("data.artifacts[0].etag", "abc"))},
		{"error field", mutate(string(failed), set("data.error.retryable", false))},
	}
	for _, tt := range added {
		if err := schemaAccepts(sch, []byte(tt.doc)); err != nil {
			t.Errorf("added %s: published schema rejects it: %v", tt.name, err)
		}
		if err := schemaAccepts(strict, []byte(tt.doc)); err == nil {
			t.Errorf("added %s: strict schema accepts it", tt.name)
		}
	}
}

var jsonBlock = regexp.MustCompile("(?s)```json\\s*\\n(.*?)```")

// TestREADMESpecs checks that every job spec README.md and the pages under
// docs/ show (a ```json block with "version" and "kind" in it) satisfies
// both the schema and Decode.
func TestREADMESpecs(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join("..", "..", "README.md")}, pages...)
	sch := compileSchema(t, "jobspec.schema.json")
	checked := 0
	for _, page := range pages {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(page)
		for i, block := range specBlocks(md) {
			checked++
			first, _, _ := strings.Cut(strings.TrimSpace(string(block)), "\n")
			if err := schemaAccepts(sch, block); err != nil {
				t.Errorf("%s spec #%d (%s...): schema: %v", name, i+1, first, err)
			}
			if _, err := Decode(block, ""); err != nil {
				t.Errorf("%s spec #%d (%s...): Decode: %v", name, i+1, first, err)
			}
		}
	}
	// The job spec page shows one spec of every scenario.
	if checked < 7 {
		t.Errorf("found %d specs in README.md and docs/*.md, want at least 7", checked)
	}
	t.Logf("checked %d specs in README.md and docs/*.md", checked)
}

// specBlocks returns the ```json blocks of a Markdown document that hold
// both "version" and "kind".
func specBlocks(md []byte) [][]byte {
	var out [][]byte
	for _, m := range jsonBlock.FindAllSubmatch(md, -1) {
		if bytes.Contains(m[1], []byte(`"version"`)) && bytes.Contains(m[1], []byte(`"kind"`)) {
			out = append(out, m[1])
		}
	}
	return out
}

func TestSpecBlocks(t *testing.T) {
	t.Parallel()
	md := "# T\n\n```json\n{\"version\": 1, \"kind\": \"video\"}\n```\n\n" +
		"```json\n{\"specversion\": \"1.0\", \"data\": {\"kind\": \"video\"}}\n```\n" +
		"```sh\necho '{\"version\":1,\"kind\":\"x\"}'\n```\n" +
		"```json\n{\n  \"version\": 1,\n  \"kind\": \"speech\"\n}\n```\n"
	got := specBlocks([]byte(md))
	if len(got) != 2 || !bytes.Contains(got[0], []byte("video")) || !bytes.Contains(got[1], []byte("speech")) {
		t.Errorf("specBlocks = %q", got)
	}
}
