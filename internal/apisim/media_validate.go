package apisim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// maxRequestBody bounds a request body (base64 media can be large).
const maxRequestBody = 64 << 20

// paramError is a 400 invalid_parameter answer naming the field.
type paramError struct {
	param, msg string
}

func (e *paramError) Error() string { return e.param + ": " + e.msg }

func badParam(param, format string, args ...any) *paramError {
	return &paramError{param: param, msg: fmt.Sprintf(format, args...)}
}

// decodeBody checks the Content-Type and decodes r's JSON body into v,
// refusing unknown fields and trailing data.
func decodeBody(r *http.Request, v any) *paramError {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return badParam("Content-Type", "must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxRequestBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return badParam("body", "larger than %d bytes", maxRequestBody)
		}
		return badParam("body", "cannot be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
			return badParam(te.Field, "must be a JSON %s, not %s", jsonKind(te.Type.Kind().String()), te.Value)
		}
		return badParam("body", "is not a valid request: %v", err)
	}
	if dec.More() {
		return badParam("body", "has data after the JSON object")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "slice":
		return "array"
	case "struct", "map", "ptr":
		return "object"
	default:
		return "number"
	}
}

// videoBody is a video submit body; pointers tell absent from empty.
type videoBody struct {
	Model *string `json:"model"`
	Input *struct {
		Prompt *string   `json:"prompt"`
		Images []*string `json:"images"`
		Media  []*struct {
			Type *string `json:"type"`
			URL  *string `json:"url"`
		} `json:"media"`
	} `json:"input"`
	Parameters *struct {
		Resolution *string          `json:"resolution"`
		Duration   *json.RawMessage `json:"duration"`
		Ratio      *string          `json:"ratio"`
		Watermark  *bool            `json:"watermark"`
	} `json:"parameters"`
}

// Video rules (spec/media-api.md 2.4, 4.1, 8). The simulator's table
// stands for the platform, not for sluice's model catalog: every model
// takes the document's resolutions; outside Letter mode the models public
// clients use (spec/platform-evidence.md section 6) also take
// platformResolutions, spelled as the platform spells them.
var (
	resolutions         = []string{"768P", "2K"}
	platformResolutions = map[string][]string{
		"Seedance2.0": {"720p", "1080p"}, "Wan2.7-T2V": {"720p", "1080p"}, "HappyHorse-1.0-T2V": {"720p", "1080p"},
	}
	ratios  = []string{"adaptive", "21:9", "16:9", "4:3", "1:1", "3:4", "9:16"}
	roleMax = map[string]int{
		"first_frame": 1, "last_frame": 1,
		"reference_image": 9, "reference_video": 3, "reference_audio": 3,
	}
)

const (
	maxPromptRunes = 7000
	minDuration    = 4
	maxDuration    = 15
)

// videoFacts is what the simulator needs of a valid video request.
type videoFacts struct {
	prompt     string
	resolution string
	duration   int
	ratio      string // as used: for image scenarios, what "the image" gave
	images     int    // input images that count for billing
}

// videoResolutions are the resolutions model takes.
func videoResolutions(model string, letter bool) []string {
	if letter {
		return resolutions
	}
	return append(slices.Clone(resolutions), platformResolutions[model]...)
}

// validateVideo checks b by the documented rules (or the platform's, see
// videoResolutions) and names the first offending field.
func validateVideo(b *videoBody, letter bool) (videoFacts, *paramError) {
	var f videoFacts
	if b.Model == nil || strings.TrimSpace(*b.Model) == "" {
		return f, badParam("model", "is required")
	}
	if b.Input == nil {
		return f, badParam("input", "is required")
	}
	in := b.Input
	if in.Prompt == nil {
		return f, badParam("input.prompt", "is required")
	}
	f.prompt = *in.Prompt
	if strings.TrimSpace(f.prompt) == "" {
		return f, badParam("input.prompt", "must not be empty")
	}
	if n := utf8.RuneCountInString(f.prompt); n > maxPromptRunes {
		return f, badParam("input.prompt", "has %d characters, at most %d are allowed", n, maxPromptRunes)
	}
	if len(in.Images) > 1 {
		return f, badParam("input.images", "has %d entries, at most 1 is allowed", len(in.Images))
	}
	for i, img := range in.Images {
		if img == nil || *img == "" {
			return f, badParam(fmt.Sprintf("input.images[%d]", i), "must be a non-empty address")
		}
	}
	counts := map[string]int{"first_frame": len(in.Images)} // images are first frames
	f.images = len(in.Images)
	for i, md := range in.Media {
		field := fmt.Sprintf("input.media[%d]", i)
		if md == nil {
			return f, badParam(field, "must be an object")
		}
		if md.Type == nil {
			return f, badParam(field+".type", "is required")
		}
		if _, ok := roleMax[*md.Type]; !ok {
			return f, badParam(field+".type", "must be one of first_frame, last_frame, reference_image, reference_video, reference_audio")
		}
		if md.URL == nil || *md.URL == "" {
			return f, badParam(field+".url", "is required")
		}
		counts[*md.Type]++
		if *md.Type != "reference_video" && *md.Type != "reference_audio" {
			f.images++
		}
	}
	for _, role := range []string{"first_frame", "last_frame", "reference_image", "reference_video", "reference_audio"} {
		if counts[role] > roleMax[role] {
			return f, badParam("input.media", "has %d %s entries, at most %d are allowed", counts[role], role, roleMax[role])
		}
	}
	frames := counts["first_frame"] + counts["last_frame"]
	refs := counts["reference_image"] + counts["reference_video"] + counts["reference_audio"]
	if frames > 0 && refs > 0 {
		return f, badParam("input.media", "mixes first_frame/last_frame with reference roles")
	}

	p := b.Parameters
	if p == nil {
		return f, badParam("parameters", "is required")
	}
	if p.Resolution == nil {
		return f, badParam("parameters.resolution", "is required")
	}
	if res := videoResolutions(*b.Model, letter); !slices.Contains(res, *p.Resolution) {
		return f, badParam("parameters.resolution", "must be one of %s for model %s", strings.Join(res, ", "), *b.Model)
	}
	f.resolution = *p.Resolution
	if p.Duration == nil || string(*p.Duration) == "null" {
		return f, badParam("parameters.duration", "is required")
	}
	var dur json.Number
	raw := bytes.TrimSpace(*p.Duration)
	if len(raw) == 0 || raw[0] == '"' { // json.Number would accept "5"
		return f, badParam("parameters.duration", "must be an integer number of seconds")
	}
	if err := json.Unmarshal(raw, &dur); err != nil {
		return f, badParam("parameters.duration", "must be an integer number of seconds")
	}
	d64, err := dur.Int64()
	if err != nil {
		return f, badParam("parameters.duration", "must be an integer number of seconds")
	}
	if d64 < minDuration || d64 > maxDuration {
		return f, badParam("parameters.duration", "must be between %d and %d seconds", minDuration, maxDuration)
	}
	f.duration = int(d64)
	if p.Ratio != nil && !slices.Contains(ratios, *p.Ratio) {
		return f, badParam("parameters.ratio", "must be one of %s", strings.Join(ratios, ", "))
	}
	switch {
	case frames == 0 && refs == 0: // text-to-video
		if p.Ratio == nil || *p.Ratio == "adaptive" {
			return f, badParam("parameters.ratio", "is required and must not be adaptive for text-to-video")
		}
		f.ratio = *p.Ratio
	case frames > 0: // the ratio comes from the image
		f.ratio = "16:9"
	default: // multimodal reference
		f.ratio = "adaptive"
		if p.Ratio != nil {
			f.ratio = *p.Ratio
		}
		if f.ratio == "adaptive" {
			f.ratio = "16:9"
		}
	}
	return f, nil
}

// speechBody is a speech submit body; pointers tell absent from empty.
type speechBody struct {
	Model *string `json:"model"`
	Input *struct {
		Text                 *string `json:"text"`
		Voice                *string `json:"voice"`
		LanguageType         *string `json:"language_type"`
		Instructions         *string `json:"instructions"`
		OptimizeInstructions *bool   `json:"optimize_instructions"`
	} `json:"input"`
	StreamFormat *string `json:"stream_format"`
}

// validateSpeech checks b by the documented rules (2.5, 4.2) and returns
// the text and whether a stream was asked for.
func validateSpeech(b *speechBody) (text string, stream bool, perr *paramError) {
	if b.Model == nil || strings.TrimSpace(*b.Model) == "" {
		return "", false, badParam("model", "is required")
	}
	if b.Input == nil {
		return "", false, badParam("input", "is required")
	}
	if b.Input.Text == nil || strings.TrimSpace(*b.Input.Text) == "" {
		return "", false, badParam("input.text", "is required")
	}
	if b.Input.Voice == nil || strings.TrimSpace(*b.Input.Voice) == "" {
		return "", false, badParam("input.voice", "is required")
	}
	if b.StreamFormat != nil {
		if *b.StreamFormat != "sse" {
			return "", false, badParam("stream_format", "must be sse when present")
		}
		stream = true
	}
	return *b.Input.Text, stream, nil
}
