package jobspec

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/apiclient"
)

// SpeechMode is how a speech job talks to upstream.
type SpeechMode string

// The speech modes (docs/job-spec.md).
const (
	// ModeSync asks for the result in the submit response.
	ModeSync SpeechMode = "sync"
	// ModeAsync creates a task and polls it; the default.
	ModeAsync SpeechMode = "async"
	// ModeStream reads Server-Sent Events and writes the decoded audio
	// increments as one object.
	ModeStream SpeechMode = "stream"
)

var speechModes = []string{string(ModeSync), string(ModeAsync), string(ModeStream)}

// StreamFormatSSE is the stream_format of a streamed speech request.
const StreamFormatSSE = "sse"

// Speech is the speech section: the media API's speech request body
// (media-api.md 2.5) plus the delivery mode. stream_format is not a spec
// field: Mode decides it.
type Speech struct {
	// Model is the speech model name; required.
	Model string `json:"model"`
	// Input holds the text and the voice.
	Input SpeechInput `json:"input"`
	// Mode is sync, async or stream; empty means async.
	Mode SpeechMode `json:"mode,omitempty"`
}

// SpeechInput is the input object of a speech request (the upstream type
// itself). Text and Voice are required and not blank; LanguageType and
// Instructions are optional and not empty when given; a nil
// OptimizeInstructions leaves it out of the request.
type SpeechInput = apiclient.SpeechInput

// EffectiveMode returns Mode, or ModeAsync when it is empty.
func (s *Speech) EffectiveMode() SpeechMode {
	if s.Mode == "" {
		return ModeAsync
	}
	return s.Mode
}

// Request returns the upstream request body. StreamFormat is "sse" exactly
// when the effective mode is stream; whether the call is asynchronous is a
// header, not part of the body. The result shares nothing with s.
func (s *Speech) Request() apiclient.SpeechRequest {
	r := apiclient.SpeechRequest{Model: s.Model, Input: s.Input}
	r.Input.OptimizeInstructions = clonePtr(s.Input.OptimizeInstructions)
	if s.EffectiveMode() == ModeStream {
		r.StreamFormat = StreamFormatSSE
	}
	return r
}

func (s *Speech) decode(d *decoder, path string, raw json.RawMessage) bool {
	return d.object(path, raw, map[string]fieldFunc{
		"model": func(p string, r json.RawMessage) { d.str(p, r, &s.Model) },
		"input": func(p string, r json.RawMessage) {
			in := &s.Input
			d.object(p, r, map[string]fieldFunc{
				"text":                  func(p string, r json.RawMessage) { d.str(p, r, &in.Text) },
				"voice":                 func(p string, r json.RawMessage) { d.str(p, r, &in.Voice) },
				"language_type":         func(p string, r json.RawMessage) { d.optStr(p, r, &in.LanguageType) },
				"instructions":          func(p string, r json.RawMessage) { d.optStr(p, r, &in.Instructions) },
				"optimize_instructions": func(p string, r json.RawMessage) { d.boolPtr(p, r, &in.OptimizeInstructions) },
			})
		},
		"mode": func(p string, r json.RawMessage) {
			var m string
			d.optStr(p, r, &m)
			s.Mode = SpeechMode(m)
		},
	})
}

func (s *Speech) validate(ps *problems, path string) {
	requireText(ps, field(path, "model"), s.Model)
	in := field(path, "input")
	requireText(ps, field(in, "text"), s.Input.Text)
	requireText(ps, field(in, "voice"), s.Input.Voice)
	if s.Mode != "" && !slices.Contains(speechModes, string(s.Mode)) {
		ps.add(field(path, "mode"), "must be one of "+strings.Join(speechModes, ", ")+", got "+quote(string(s.Mode)))
	}
}
