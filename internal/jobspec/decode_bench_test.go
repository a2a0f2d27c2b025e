package jobspec

import "testing"

// BenchmarkDecodeVideo decodes the spec of a video job like the ones the
// benchmarks publish: a worker decodes each job's spec once, at its first
// step.
func BenchmarkDecodeVideo(b *testing.B) {
	data := []byte(`{"id":"bench-000001","kind":"video","video":{"model":"m","input":{"prompt":"a paper boat, job bench-000001 [sim:duration=0s]"},` +
		`"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data, KindVideo); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeVideoCatalogModel decodes a request as public clients
// send it: a model the catalog names, its resolution in another case
// (rewritten in the catalog's spelling).
func BenchmarkDecodeVideoCatalogModel(b *testing.B) {
	data := []byte(`{"id":"bench-000001","kind":"video","video":{"model":"Seedance2.0","input":{"prompt":"a paper boat, job bench-000001 [sim:duration=0s]"},` +
		`"parameters":{"resolution":"720P","duration":5,"ratio":"16:9"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data, KindVideo); err != nil {
			b.Fatal(err)
		}
	}
}
