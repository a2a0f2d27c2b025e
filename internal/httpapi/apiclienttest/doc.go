// Package apiclienttest is a client of the HTTP API generated from its
// OpenAPI document by oapi-codegen, a generator nobody on the project
// wrote: tests drive the API with it to show that the document is enough
// to talk to the API. Only tests import it.
package apiclienttest

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../openapi.json
//go:generate go run ../gendoc -sum ../openapi.json -out openapi.sha256
