// Package notests has no tests: go test reports it skipped ("?").
package notests
