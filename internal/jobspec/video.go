package jobspec

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/models"
)

// Video limits of media-api.md sections 2.4 and 8. The resolutions,
// durations, ratios and input kinds each model accepts are the model
// catalog's (internal/models).
const (
	MaxPromptChars = 7000
	MaxImages      = 1
)

// maxMediaPerRole is the most media items of each role one request may
// carry (media-api.md 2.4).
var maxMediaPerRole = map[string]int{
	apiclient.RoleFirstFrame:     1,
	apiclient.RoleLastFrame:      1,
	apiclient.RoleReferenceImage: 9,
	apiclient.RoleReferenceVideo: 3,
	apiclient.RoleReferenceAudio: 3,
}

// roles in the order the upstream document lists them.
var roles = []string{
	apiclient.RoleFirstFrame, apiclient.RoleLastFrame,
	apiclient.RoleReferenceImage, apiclient.RoleReferenceVideo, apiclient.RoleReferenceAudio,
}

// RatioAdaptive is the ratio text-to-video must not use.
const RatioAdaptive = "adaptive"

// Video is the video section: the media API's video request body
// (apiclient.VideoRequest, media-api.md 2.4, 4.1) as it will be sent, except
// that media URLs may be s3://bucket/key. Its parts are the upstream types
// themselves; the spec's rules are in their comments below and in validate.
type Video struct {
	// Model is the video model name; required.
	Model string `json:"model"`
	// Input holds the prompt and the media.
	Input VideoInput `json:"input"`
	// Parameters holds resolution, duration, ratio and watermark.
	Parameters VideoParameters `json:"parameters"`

	// priceRule is the rule pricing a second of it, from the catalog
	// entry it was checked against; "" until validated.
	priceRule string
}

// PriceRule is the rule pricing a second of the video (docs/tenants.md#prices):
// the one its model's catalog entry maps its resolution to, as validation
// found it, else video.<resolution>.second.
func (v *Video) PriceRule() string {
	if v.priceRule != "" {
		return v.priceRule
	}
	return models.PriceRule(v.Parameters.Resolution)
}

// VideoInput is the input object of a video request. Prompt is required:
// not blank, at most 7000 characters (runes). Images holds at most one
// image, which is the first frame. Media holds role-tagged media inputs.
type VideoInput = apiclient.VideoInput

// Media is one role-tagged media input. Type is the role (first_frame,
// last_frame, reference_image, reference_video or reference_audio); URL is
// an http(s) URL, a base64 data URI (data:<mime>;base64,<payload>) or
// s3://bucket/key.
type Media = apiclient.MediaInput

// VideoParameters is the parameters object of a video request.
// Resolution and Duration (whole seconds) are required, Ratio is required
// and not adaptive for text-to-video, ignored upstream for first/last
// frame, optional (default adaptive) for multimodal reference; the values
// each model accepts are the model catalog's (shipped: resolutions 768P,
// 2K, 720p, 1080p, durations 4-15 s, ratios adaptive, 21:9, 16:9, 4:3,
// 1:1, 3:4, 9:16). A nil Watermark means upstream's default (false).
type VideoParameters = apiclient.VideoParameters

// VideoScenario is the kind of video request, decided by its media.
type VideoScenario string

// The scenarios of media-api.md 2.4: the catalog's input kinds.
const (
	ScenarioTextToVideo  VideoScenario = models.InputText
	ScenarioImageToVideo VideoScenario = models.InputImage
	ScenarioReference    VideoScenario = models.InputReference
)

// Scenario returns the request's scenario: text-to-video when there are
// no images and no media, image-to-video when images or a first/last frame
// is present, else multimodal reference when a reference role is present. A
// valid Video never mixes the two; for an invalid one whose media roles are
// all unknown it returns "".
func (v *Video) Scenario() VideoScenario {
	if len(v.Input.Images) == 0 && len(v.Input.Media) == 0 {
		return ScenarioTextToVideo
	}
	if len(v.Input.Images) > 0 {
		return ScenarioImageToVideo
	}
	for _, m := range v.Input.Media {
		if frameRole(m.Type) {
			return ScenarioImageToVideo
		}
	}
	for _, m := range v.Input.Media {
		if referenceRole(m.Type) {
			return ScenarioReference
		}
	}
	return ""
}

// Request returns the upstream request body: the section as it is, s3://
// URLs included (the worker presigns them before submitting). The result
// shares nothing with v.
func (v *Video) Request() apiclient.VideoRequest {
	r := apiclient.VideoRequest{Model: v.Model, Input: v.Input, Parameters: v.Parameters}
	r.Input.Images = cloneOrNil(v.Input.Images)
	r.Input.Media = cloneOrNil(v.Input.Media)
	r.Parameters.Watermark = clonePtr(v.Parameters.Watermark)
	return r
}

// cloneOrNil returns a copy of s, nil when s is empty.
func cloneOrNil[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// clonePtr returns a pointer to a copy of *p, nil when p is nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func frameRole(t string) bool {
	return t == apiclient.RoleFirstFrame || t == apiclient.RoleLastFrame
}

func referenceRole(t string) bool {
	return t == apiclient.RoleReferenceImage || t == apiclient.RoleReferenceVideo || t == apiclient.RoleReferenceAudio
}

// mediaClass is the data URI MIME family a role takes.
func mediaClass(role string) string {
	switch role {
	case apiclient.RoleReferenceVideo:
		return "video"
	case apiclient.RoleReferenceAudio:
		return "audio"
	default:
		return "image"
	}
}

func (v *Video) decode(d *decoder, path string, raw json.RawMessage) bool {
	return d.object(path, raw, map[string]fieldFunc{
		"model": func(p string, r json.RawMessage) { d.str(p, r, &v.Model) },
		"input": func(p string, r json.RawMessage) {
			d.object(p, r, map[string]fieldFunc{
				"prompt": func(p string, r json.RawMessage) { d.str(p, r, &v.Input.Prompt) },
				"images": func(p string, r json.RawMessage) {
					elems, _ := d.array(p, r)
					for i, e := range elems {
						// Keep even a broken item, so indexes match the document.
						var u string
						d.str(index(p, i), e, &u)
						v.Input.Images = append(v.Input.Images, u)
					}
				},
				"media": func(p string, r json.RawMessage) {
					elems, _ := d.array(p, r)
					for i, e := range elems {
						var m Media
						d.object(index(p, i), e, map[string]fieldFunc{
							"type": func(p string, r json.RawMessage) { d.str(p, r, &m.Type) },
							"url":  func(p string, r json.RawMessage) { d.str(p, r, &m.URL) },
						})
						// Keep even a broken item, so indexes in later
						// problems match the document.
						v.Input.Media = append(v.Input.Media, m)
					}
				},
			})
		},
		"parameters": func(p string, r json.RawMessage) {
			prm := &v.Parameters
			d.object(p, r, map[string]fieldFunc{
				"resolution": func(p string, r json.RawMessage) { d.str(p, r, &prm.Resolution) },
				"duration": func(p string, r json.RawMessage) {
					// The range is the model's, checked in validate.
					d.integer(p, r, &prm.Duration, math.MinInt32, math.MaxInt32, "must be an integer number of seconds")
				},
				"ratio":     func(p string, r json.RawMessage) { d.optStr(p, r, &prm.Ratio) },
				"watermark": func(p string, r json.RawMessage) { d.boolPtr(p, r, &prm.Watermark) },
			})
		},
	})
}

// ModelKnown reports whether cat names v's model; a model it does not
// name is checked against its default entry.
func (v *Video) ModelKnown(cat *models.Catalog) bool {
	_, _, known := cat.Lookup(v.Model)
	return known
}

// openEntry is a catalog entry that takes v's own values: checking v
// against it checks the document's structure alone.
func openEntry(v *Video) models.Entry {
	return models.Entry{
		Resolutions: []string{v.Parameters.Resolution},
		Durations:   models.Durations{Min: 1, Max: math.MaxInt32},
		Ratios:      []string{v.Parameters.Ratio, RatioAdaptive},
		Inputs:      []string{string(ScenarioTextToVideo), string(ScenarioImageToVideo), string(ScenarioReference)},
	}
}

// validate checks v against its model's entry in cat, or, when cat is
// nil, its structure alone. A model or resolution the catalog spells
// otherwise (in another case) is rewritten in the catalog's spelling, the
// one sent upstream.
func (v *Video) validate(ps *problems, path string, cat *models.Catalog) {
	requireText(ps, field(path, "model"), v.Model)
	name, entry, known := v.Model, openEntry(v), false
	if cat != nil {
		name, entry, known = cat.Lookup(v.Model)
	}
	v.Model = name
	// Which list a value was checked against, so a refusal is clear.
	of := ""
	if known {
		of = " (model " + name + ")"
	}

	in := field(path, "input")
	prompt := field(in, "prompt")
	requireText(ps, prompt, v.Input.Prompt)
	if n := utf8.RuneCountInString(v.Input.Prompt); n > MaxPromptChars {
		ps.add(prompt, fmt.Sprintf("must be at most %d characters, got %d", MaxPromptChars, n))
	}

	images := field(in, "images")
	if len(v.Input.Images) > MaxImages {
		ps.add(images, fmt.Sprintf("at most %d item (images count as the first frame), got %d", MaxImages, len(v.Input.Images)))
	}
	for i, u := range v.Input.Images {
		if rule := mediaURLRule(u, "image"); rule != "" {
			ps.add(index(images, i), rule)
		}
	}

	// The scenario is decided by images or the first media item with a
	// known role; every item of the other group is the one reported.
	media := field(in, "media")
	decider := ""
	if len(v.Input.Images) > 0 {
		decider = "images"
	} else {
		for _, m := range v.Input.Media {
			if frameRole(m.Type) || referenceRole(m.Type) {
				decider = m.Type
				break
			}
		}
	}
	deciderIsFrame := decider == "images" || frameRole(decider)
	count := map[string]int{apiclient.RoleFirstFrame: len(v.Input.Images)}
	for i, m := range v.Input.Media {
		item := index(media, i)
		if _, ok := maxMediaPerRole[m.Type]; !ok {
			if m.Type == "" {
				ps.add(field(item, "type"), "required (one of "+strings.Join(roles, ", ")+")")
			} else {
				ps.add(field(item, "type"), "must be one of "+strings.Join(roles, ", ")+", got "+quote(m.Type))
			}
		} else {
			count[m.Type]++
			switch {
			case frameRole(m.Type) != deciderIsFrame:
				ps.add(item, fmt.Sprintf("role %s cannot be combined with %s", m.Type, decider))
			case m.Type == apiclient.RoleFirstFrame && len(v.Input.Images) > 0:
				ps.add(item, "role first_frame cannot be combined with images (images count as the first frame, at most 1)")
			case count[m.Type] == maxMediaPerRole[m.Type]+1:
				ps.add(item, fmt.Sprintf("at most %d %s item(s)", maxMediaPerRole[m.Type], m.Type))
			}
		}
		if rule := mediaURLRule(m.URL, mediaClass(m.Type)); rule != "" {
			ps.add(field(item, "url"), rule)
		}
	}

	if sc := v.Scenario(); sc != "" && !entry.Takes(string(sc)) {
		at := media
		if len(v.Input.Images) > 0 {
			at = images
		}
		if sc == ScenarioTextToVideo {
			at = in
		}
		ps.add(at, fmt.Sprintf("%s input is not taken%s (takes %s)", sc, of, strings.Join(entry.Inputs, ", ")))
	}

	prm := field(path, "parameters")
	res := v.Parameters.Resolution
	canon, ok := entry.Resolution(res)
	switch {
	case res == "":
		ps.add(field(prm, "resolution"), "required (one of "+strings.Join(entry.Resolutions, ", ")+of+")")
	case !ok:
		ps.add(field(prm, "resolution"), "must be one of "+strings.Join(entry.Resolutions, ", ")+of+", got "+quote(res))
	default:
		v.Parameters.Resolution = canon
		v.priceRule = entry.RuleFor(canon)
	}
	durationRange := func() string {
		return fmt.Sprintf("an integer in [%d, %d]%s", entry.Durations.Min, entry.Durations.Max, of)
	}
	switch dur := v.Parameters.Duration; {
	case dur == 0:
		ps.add(field(prm, "duration"), "required, "+durationRange())
	case dur < entry.Durations.Min || dur > entry.Durations.Max:
		ps.add(field(prm, "duration"), "must be "+durationRange())
	}
	ratio := v.Parameters.Ratio
	canonRatio, ok := entry.Ratio(ratio)
	switch {
	case ratio != "" && !ok:
		ps.add(field(prm, "ratio"), "must be one of "+strings.Join(entry.Ratios, ", ")+of+", got "+quote(ratio))
	case ratio != "":
		v.Parameters.Ratio = canonRatio
		if canonRatio == RatioAdaptive && v.Scenario() == ScenarioTextToVideo {
			ps.addDep(field(prm, "ratio"), "must not be adaptive for text-to-video", media, images)
		}
	case v.Scenario() == ScenarioTextToVideo:
		textRatios := slices.DeleteFunc(slices.Clone(entry.Ratios), func(r string) bool { return strings.EqualFold(r, RatioAdaptive) })
		ps.addDep(field(prm, "ratio"), "required for text-to-video (one of "+strings.Join(textRatios, ", ")+of+")", media, images)
	}
}

// requireText reports an empty or all-whitespace required string.
func requireText(ps *problems, path, s string) {
	switch {
	case s == "":
		ps.add(path, "required (must not be empty)")
	case strings.TrimSpace(s) == "":
		ps.add(path, "must not be blank")
	}
}

// MediaInput is one media address of a video request, with where it sits
// in the spec and the kind of media its role takes.
type MediaInput struct {
	// Field is the address's path in the spec, e.g. "video.input.media[2].url".
	Field string
	// Role is the media role; images count as first_frame.
	Role string
	// Kind is "image", "video" or "audio".
	Kind string
	// URL is the address as the spec gives it.
	URL string
}

// Inputs lists every media address of v in document order: images first,
// then media.
func (v *Video) Inputs() []MediaInput {
	var out []MediaInput
	for i, u := range v.Input.Images {
		out = append(out, MediaInput{Field: index("video.input.images", i), Role: apiclient.RoleFirstFrame, Kind: "image", URL: u})
	}
	for i, m := range v.Input.Media {
		out = append(out, MediaInput{Field: field(index("video.input.media", i), "url"), Role: m.Type, Kind: mediaClass(m.Type), URL: m.URL})
	}
	return out
}
