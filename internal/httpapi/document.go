package httpapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

//go:generate go run ./gendoc -api openapi/api.json -spec ../../docs/schema/jobspec.schema.json -event ../../docs/schema/event.schema.json -out openapi.json

// document is the OpenAPI document the API serves, generated from
// openapi/api.json and the JSON Schemas in docs/schema (go generate).
//
//go:embed openapi.json
var document []byte

// Document returns the OpenAPI 3.1 document of the API.
func Document() []byte { return document }

// tryPage is a page that submits a spec with a key and follows the job's
// events: the smallest web application of the API, and its browser test.
//
//go:embed try.html
var tryPage []byte

func serveTryPage(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'")
	_, _ = w.Write(tryPage)
}

func serveDocument(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(document)
}

// BuildDocument returns the OpenAPI document: api (the hand-written paths
// and schemas) with the job spec's and the event's JSON Schemas added as
// components JobSpec and Event. Each schema's $defs become components of
// their own (JobSpec_video, Event_data, ...) and its references follow
// them, so that every tool reads the one document without resolving
// anything outside it.
func BuildDocument(api, spec, event []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(api, &doc); err != nil {
		return nil, fmt.Errorf("api document: %w", err)
	}
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	if schemas == nil {
		return nil, fmt.Errorf("api document: no components.schemas")
	}
	for name, raw := range map[string][]byte{"JobSpec": spec, "Event": event} {
		if err := addSchema(schemas, name, raw); err != nil {
			return nil, err
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// addSchema adds the JSON Schema raw to schemas as name, its $defs as
// name_<def>.
func addSchema(schemas map[string]any, name string, raw []byte) error {
	// Rewrite the references before decoding: "#/$defs/x" and "#" (the
	// schema itself, as a pipeline step's spec) appear only as $ref
	// values.
	text := strings.ReplaceAll(string(raw), `"#/$defs/`, `"#/components/schemas/`+name+`_`)
	raw = []byte(strings.ReplaceAll(text, `"#"`, `"#/components/schemas/`+name+`"`))
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("schema %s: %w", name, err)
	}
	objectSchemas(s)
	defs, _ := s["$defs"].(map[string]any)
	for def, v := range defs {
		schemas[name+"_"+def] = v
	}
	delete(s, "$defs")
	delete(s, "$schema")
	delete(s, "$id")
	schemas[name] = s
	return nil
}

// objectSchemas replaces the boolean schemas of properties (false: the
// member must be absent) by their object form ({"not": {}}, true: {}),
// which means the same and which generators reading OpenAPI 3.0-style
// schemas accept.
func objectSchemas(v any) {
	switch v := v.(type) {
	case map[string]any:
		if props, ok := v["properties"].(map[string]any); ok {
			for name, p := range props {
				if b, ok := p.(bool); ok {
					props[name] = map[string]any{}
					if !b {
						props[name] = map[string]any{"not": map[string]any{}}
					}
				}
			}
		}
		for _, x := range v {
			objectSchemas(x)
		}
	case []any:
		for _, x := range v {
			objectSchemas(x)
		}
	}
}
