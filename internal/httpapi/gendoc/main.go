// Command gendoc writes the HTTP API's OpenAPI document from its
// hand-written part and the JSON Schemas of docs/schema
// (httpapi.BuildDocument); go generate ./internal/httpapi runs it.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/internal/httpapi"
)

func main() {
	api := flag.String("api", "openapi/api.json", "the hand-written part")
	spec := flag.String("spec", "", "the job spec's JSON Schema")
	event := flag.String("event", "", "the event's JSON Schema")
	out := flag.String("out", "openapi.json", "the document to write")
	sum := flag.String("sum", "", "instead, write the SHA-256 of this file to -out (what a generated client was made from)")
	flag.Parse()
	run := run
	if *sum != "" {
		run = func(_, _, _, out string) error { return writeSum(*sum, out) }
	}
	if err := run(*api, *spec, *event, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}

func run(api, spec, event, out string) error {
	var parts [3][]byte
	for i, f := range []string{api, spec, event} {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		parts[i] = b
	}
	doc, err := httpapi.BuildDocument(parts[0], parts[1], parts[2])
	if err != nil {
		return err
	}
	return os.WriteFile(out, doc, 0o644)
}

// writeSum writes the hex SHA-256 of file to out.
func writeSum(file, out string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	return os.WriteFile(out, []byte(hex.EncodeToString(sum[:])+"\n"), 0o644)
}
