// Package tracetest checks a job's trace end to end against a real trace
// backend: Jaeger v2's all-in-one, built from its Go module by make jaeger
// into bin/jaeger, with in-memory storage. A worker and enqueue export to
// its OTLP receiver; the test reads the trace back through Jaeger's query
// API and checks the worker's spans and their link to the producer's span
// (docs/operating.md#traces).
//
// It is a Go module of its own, which make test-traces runs; Jaeger is a
// tool of another, internal/tracetest/jaeger, which holds nothing else so
// that Jaeger builds with its own dependencies' versions, out of the
// worker's go.mod.
package tracetest
