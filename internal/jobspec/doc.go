// Package jobspec defines sluice's job spec (docs/job-spec.md): the
// JSON document a producer publishes to sluice.jobs.<kind>, its strict
// decoding, its complete validation, and the upstream request bodies it
// builds.
//
// Decode is the only way bytes become a Spec. It rejects documents over
// MaxSpecBytes, unknown and duplicate fields at every level, wrong JSON
// types, any version but 1 and a kind that differs from the subject's, then
// validates every rule of the contract and of the upstream API documents.
// All problems are reported together as one *Error whose Problems name the
// field path and the rule, for example
//
//	video.input.media[3]: role reference_image cannot be combined with first_frame
//
// Error messages never repeat a URL, a label value or any other value a
// producer could have put a secret in; they name the field instead.
//
// A valid Spec builds its upstream request with (*Video).Request,
// (*Speech).Request or (*Compute).Request. Media URLs of the form
// s3://bucket/key are kept as they are: presigning them is the worker's job.
package jobspec
