package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// invalidCase is a spec that breaks one rule, and the problem it must give.
type invalidCase struct {
	name string
	doc  string
	kind Kind   // the kind it arrives for
	path string // Problem.Path
	rule string // a fragment of Problem.Rule
}

func invalidCases(t testing.TB) []invalidCase {
	t.Helper()
	read := func(name string) string {
		data, err := readExampleFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	text := read("text-to-video")
	first := read("image-to-video-first-frame")
	images := read("image-to-video-images")
	ref := read("multimodal-reference")
	speech := read("speech-sync")
	compute := read("compute")
	extra := read("compute-extra")

	media := func(items ...string) []any {
		var out []any
		for _, it := range items {
			typ, url, _ := strings.Cut(it, " ")
			out = append(out, map[string]any{"type": typ, "url": url})
		}
		return out
	}
	repeat := func(n int, item string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = item
		}
		return out
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }

	return []invalidCase{
		// The document.
		{name: "not JSON", doc: `{"kind":`, path: "", rule: "not valid JSON"},
		{name: "top level array", doc: `[` + text + `]`, path: "", rule: "must be a JSON object, got an array"},
		{name: "two objects", doc: text + text, path: "", rule: "not valid JSON"},
		{name: "over 1 MiB", doc: mutate(text, set("video.input.prompt", strings.Repeat("a", MaxSpecBytes))), path: "", rule: "more than the limit of 1048576"},
		{name: "invalid UTF-8", doc: strings.Replace(text, "paper", "pap\xffer", 1), path: "", rule: "UTF-8"},
		{name: "unknown top-level field", doc: mutate(text, set("kinds", "video")), path: "kinds", rule: "unknown field"},
		{name: "unknown field with odd name", doc: mutate(text, set("a b", 1)), path: `["a b"]`, rule: "unknown field"},
		{name: "duplicate field", doc: strings.Replace(text, `"id": "clip-0001",`, `"id": "clip-0001", "id": "clip-0002",`, 1), path: "id", rule: "duplicate field"},
		{name: "version 2", doc: mutate(text, set("version", 2)), path: "version", rule: "must be 1"},
		{name: "version as string", doc: mutate(text, set("version", "1")), path: "version", rule: "must be 1, got a string"},
		{name: "id with bad first character", doc: mutate(text, set("id", "-clip")), path: "id", rule: "must match"},
		{name: "id too long", doc: mutate(text, set("id", strings.Repeat("a", 129))), path: "id", rule: "must match"},
		{name: "id with a dot", doc: mutate(text, set("id", "clip.1")), path: "id", rule: "must match"},
		{name: "tenant not an id", doc: mutate(text, set("tenant", "team a")), path: "tenant", rule: "must be an id"},
		{name: "tenant empty", doc: mutate(text, set("tenant", "")), path: "tenant", rule: "must be an id"},
		{name: "tenant a number", doc: mutate(text, set("tenant", 7)), path: "tenant", rule: "must be a string"},
		{name: "priority 0", doc: mutate(text, set("priority", 0)), path: "priority", rule: "from 1 (the most urgent) to 5"},
		{name: "priority 6", doc: mutate(text, set("priority", 6)), path: "priority", rule: "from 1 (the most urgent) to 5"},
		{name: "priority 2.5", doc: mutate(text, set("priority", 2.5)), path: "priority", rule: "from 1 (the most urgent) to 5"},
		{name: "priority high", doc: mutate(text, set("priority", "high")), path: "priority", rule: "to 5, got a string"},
		{name: "kind missing", doc: mutate(text, del("kind")), path: "kind", rule: "required"},
		{name: "kind unknown", doc: mutate(text, set("kind", "audio")), path: "kind", rule: "must be one of video, speech, compute"},
		{name: "kind differs from subject", doc: text, kind: KindSpeech, path: "kind", rule: "the kind of the subject"},
		{name: "arrived for unknown kind", doc: text, kind: "audio", path: "", rule: "arrived for unknown kind"},
		{name: "labels not an object", doc: mutate(text, set("labels", []any{"a"})), path: "labels", rule: "must be an object"},
		{name: "33 labels", doc: mutate(text, set("labels", labelsOf(33, "k", "v"))), path: "labels", rule: "at most 32"},
		{name: "label key empty", doc: mutate(text, set("labels", map[string]string{"": "v"})), path: `labels[""]`, rule: "key must not be empty"},
		{name: "label key 64 bytes", doc: mutate(text, set("labels", map[string]string{strings.Repeat("k", 64): "v"})), path: `labels.` + strings.Repeat("k", 64), rule: "at most 63 bytes"},
		{name: "label key 64 bytes in 32 characters", doc: mutate(text, set("labels", map[string]string{strings.Repeat("é", 32): "v"})), path: `labels["` + strings.Repeat("é", 32) + `"]`, rule: "at most 63 bytes"},
		{name: "label value 257 bytes", doc: mutate(text, set("labels", map[string]string{"k": strings.Repeat("v", 257)})), path: "labels.k", rule: "at most 256 bytes"},
		{name: "label value not a string", doc: mutate(text, set("labels", map[string]any{"k": 1})), path: "labels.k", rule: "must be a string"},
		{name: "output not an object", doc: mutate(text, set("output", "spring")), path: "output", rule: "must be an object"},
		{name: "output unknown field", doc: mutate(text, set("output.bucket", "b")), path: "output.bucket", rule: "unknown field"},
		{name: "prefix leading slash", doc: mutate(text, set("output.prefix", "/spring")), path: "output.prefix", rule: "no leading"},
		{name: "prefix dot-dot segment", doc: mutate(text, set("output.prefix", "spring/../x")), path: "output.prefix", rule: `".." segment`},
		{name: "prefix dot segment", doc: mutate(text, set("output.prefix", "./spring")), path: "output.prefix", rule: `"." or ".." segment`},
		{name: "prefix empty segment", doc: mutate(text, set("output.prefix", "spring//clips")), path: "output.prefix", rule: "empty segment"},
		{name: "prefix trailing slash", doc: mutate(text, set("output.prefix", "spring/")), path: "output.prefix", rule: "empty segment"},
		{name: "prefix too long", doc: mutate(text, set("output.prefix", strings.Repeat("p", 513))), path: "output.prefix", rule: "at most 512 bytes"},
		{name: "prefix empty", doc: mutate(text, set("output.prefix", "")), path: "output.prefix", rule: "must not be empty when given"},
		{name: "prefix control character", doc: mutate(text, set("output.prefix", "a\nb")), path: "output.prefix", rule: "control characters"},
		{name: "section missing", doc: mutate(text, del("video")), path: "video", rule: "required when kind is video"},
		{name: "second section", doc: mutate(text, set("speech", map[string]any{})), path: "speech", rule: "must be absent when kind is video"},
		{name: "section null", doc: mutate(text, set("video", nil)), path: "video", rule: "must be an object, got null"},

		// Video.
		{name: "video unknown field", doc: mutate(text, set("video.callback", "x")), path: "video.callback", rule: "unknown field"},
		{name: "model missing", doc: mutate(text, del("video.model")), path: "video.model", rule: "required"},
		{name: "input missing", doc: mutate(text, del("video.input")), path: "video.input.prompt", rule: "required"},
		{name: "video input unknown field", doc: mutate(text, set("video.input.negative_prompt", "x")), path: "video.input.negative_prompt", rule: "unknown field"},
		{name: "prompt empty", doc: mutate(text, set("video.input.prompt", "")), path: "video.input.prompt", rule: "required"},
		{name: "prompt blank", doc: mutate(text, set("video.input.prompt", " \t\n")), path: "video.input.prompt", rule: "must not be blank"},
		{name: "prompt of no-break spaces", doc: mutate(text, set("video.input.prompt", "\u00a0\u00a0")), path: "video.input.prompt", rule: "must not be blank"},
		{name: "prompt 7001 characters", doc: mutate(text, set("video.input.prompt", strings.Repeat("é", 7001))), path: "video.input.prompt", rule: "at most 7000 characters"},
		{name: "prompt not a string", doc: mutate(text, set("video.input.prompt", 42)), path: "video.input.prompt", rule: "must be a string, got a number"},
		{name: "parameters unknown field", doc: mutate(text, set("video.parameters.fps", 24)), path: "video.parameters.fps", rule: "unknown field"},
		{name: "resolution missing", doc: mutate(text, del("video.parameters.resolution")), path: "video.parameters.resolution", rule: "required"},
		{name: "resolution unknown", doc: mutate(text, set("video.parameters.resolution", "4K")), path: "video.parameters.resolution", rule: "must be one of 768P, 2K, 720p, 1080p"},
		{name: "duration missing", doc: mutate(text, del("video.parameters.duration")), path: "video.parameters.duration", rule: "required"},
		{name: "duration 3", doc: mutate(text, set("video.parameters.duration", 3)), path: "video.parameters.duration", rule: "[4, 15]"},
		{name: "duration 16", doc: mutate(text, set("video.parameters.duration", 16)), path: "video.parameters.duration", rule: "[4, 15]"},
		{name: "duration 5.5", doc: mutate(text, set("video.parameters.duration", 5.5)), path: "video.parameters.duration", rule: "must be an integer"},
		{name: "duration as string", doc: mutate(text, set("video.parameters.duration", "5")), path: "video.parameters.duration", rule: "got a string"},
		{name: "duration huge exponent", doc: mutate(text, set("video.parameters.duration", raw("1e999999999"))), path: "video.parameters.duration", rule: "must be an integer"},
		{name: "ratio unknown", doc: mutate(text, set("video.parameters.ratio", "2:1")), path: "video.parameters.ratio", rule: "must be one of adaptive, 21:9"},
		{name: "text-to-video without ratio", doc: mutate(text, del("video.parameters.ratio")), path: "video.parameters.ratio", rule: "required for text-to-video"},
		{name: "text-to-video adaptive", doc: mutate(text, set("video.parameters.ratio", "adaptive")), path: "video.parameters.ratio", rule: "must not be adaptive"},
		{name: "first frame with unlisted ratio", doc: mutate(first, set("video.parameters.ratio", "wide")), path: "video.parameters.ratio", rule: "must be one of"},
		{name: "ratio empty", doc: mutate(first, set("video.parameters.ratio", "")), path: "video.parameters.ratio", rule: "must not be empty"},
		{name: "watermark not boolean", doc: mutate(text, set("video.parameters.watermark", "no")), path: "video.parameters.watermark", rule: "must be a boolean"},
		{name: "two images", doc: mutate(images, set("video.input.images", []string{"https://e.test/a.png", "https://e.test/b.png"})), path: "video.input.images", rule: "at most 1"},
		{name: "image not a string", doc: mutate(images, set("video.input.images", []any{1})), path: "video.input.images[0]", rule: "must be a string"},
		{name: "image URL bad scheme", doc: mutate(images, set("video.input.images[0]", "ftp://e.test/a.png")), path: "video.input.images[0]", rule: "must be an http(s) URL"},
		{name: "images with reference", doc: mutate(images, set("video.input.media", media("reference_image https://e.test/r.png"))), path: "video.input.media[0]", rule: "role reference_image cannot be combined with images"},
		{name: "images with first_frame", doc: mutate(images, set("video.input.media", media("first_frame https://e.test/f.png"))), path: "video.input.media[0]", rule: "images count as the first frame"},
		{name: "media not an array", doc: mutate(first, set("video.input.media", map[string]any{})), path: "video.input.media", rule: "must be an array"},
		{name: "media item not an object", doc: mutate(first, set("video.input.media[0]", "https://e.test/f.png")), path: "video.input.media[0]", rule: "must be an object"},
		{name: "media item unknown field", doc: mutate(first, set("video.input.media[0].role", "x")), path: "video.input.media[0].role", rule: "unknown field"},
		{name: "media type unknown", doc: mutate(first, set("video.input.media[0].type", "keyframe")), path: "video.input.media[0].type", rule: "must be one of first_frame"},
		{name: "media type missing", doc: mutate(first, del("video.input.media[0].type")), path: "video.input.media[0].type", rule: "required"},
		{name: "two first frames", doc: mutate(first, set("video.input.media", media("first_frame https://e.test/a.png", "first_frame https://e.test/b.png"))), path: "video.input.media[1]", rule: "at most 1 first_frame"},
		{name: "two last frames", doc: mutate(first, set("video.input.media", media("last_frame https://e.test/a.png", "first_frame https://e.test/f.png", "last_frame https://e.test/b.png"))), path: "video.input.media[2]", rule: "at most 1 last_frame"},
		{name: "ten reference images", doc: mutate(ref, set("video.input.media", media(repeat(10, "reference_image https://e.test/r.png")...))), path: "video.input.media[9]", rule: "at most 9 reference_image"},
		{name: "four reference videos", doc: mutate(ref, set("video.input.media", media(repeat(4, "reference_video https://e.test/r.mp4")...))), path: "video.input.media[3]", rule: "at most 3 reference_video"},
		{name: "four reference audios", doc: mutate(ref, set("video.input.media", media(repeat(4, "reference_audio https://e.test/r.mp3")...))), path: "video.input.media[3]", rule: "at most 3 reference_audio"},
		{name: "first frame then reference", doc: mutate(first, set("video.input.media", media("first_frame https://e.test/f.png", "last_frame https://e.test/l.png", "reference_image https://e.test/r.png"))), path: "video.input.media[2]", rule: "role reference_image cannot be combined with first_frame"},
		{name: "reference then last frame", doc: mutate(ref, set("video.input.media", media("reference_audio https://e.test/a.mp3", "last_frame https://e.test/l.png"))), path: "video.input.media[1]", rule: "role last_frame cannot be combined with reference_audio"},
		{name: "media url missing", doc: mutate(first, del("video.input.media[0].url")), path: "video.input.media[0].url", rule: "required"},
		{name: "media url relative", doc: mutate(first, set("video.input.media[0].url", "boat.png")), path: "video.input.media[0].url", rule: "must be an http(s) URL, a base64 data URI"},
		{name: "media url scheme uppercase", doc: mutate(first, set("video.input.media[0].url", "HTTPS://e.test/a.png")), path: "video.input.media[0].url", rule: "must be an http(s) URL"},
		{name: "media url without host", doc: mutate(first, set("video.input.media[0].url", "https:///a.png")), path: "video.input.media[0].url", rule: "must name a host"},
		{name: "media url with space", doc: mutate(first, set("video.input.media[0].url", "https://e.test/a b.png")), path: "video.input.media[0].url", rule: "well-formed"},
		{name: "media url with credentials", doc: mutate(first, set("video.input.media[0].url", "https://u:p@e.test/a.png")), path: "video.input.media[0].url", rule: "credentials"},
		{name: "data URI without base64", doc: mutate(first, set("video.input.media[0].url", "data:image/png,abc")), path: "video.input.media[0].url", rule: "data:<mime>;base64,<payload>"},
		{name: "data URI bad MIME", doc: mutate(first, set("video.input.media[0].url", "data:png;base64,AAAA")), path: "video.input.media[0].url", rule: "data:<mime>;base64,<payload>"},
		{name: "data URI wrong class", doc: mutate(first, set("video.input.media[0].url", "data:audio/mpeg;base64,AAAA")), path: "video.input.media[0].url", rule: "image/*"},
		{name: "data URI bad payload", doc: mutate(first, set("video.input.media[0].url", "data:image/png;base64,AAA")), path: "video.input.media[0].url", rule: "base64"},
		{name: "data URI empty payload", doc: mutate(first, set("video.input.media[0].url", "data:image/png;base64,")), path: "video.input.media[0].url", rule: "non-empty"},
		{name: "s3 bucket uppercase", doc: mutate(first, set("video.input.media[0].url", "s3://Media/boat.png")), path: "video.input.media[0].url", rule: "bucket must hold only lowercase"},
		{name: "s3 bucket too short", doc: mutate(first, set("video.input.media[0].url", "s3://ab/boat.png")), path: "video.input.media[0].url", rule: "bucket must be 3 to 63"},
		{name: "s3 without key", doc: mutate(first, set("video.input.media[0].url", "s3://media/")), path: "video.input.media[0].url", rule: "key must not be empty"},

		// Speech.
		{name: "speech model missing", doc: mutate(speech, del("speech.model")), kind: KindSpeech, path: "speech.model", rule: "required"},
		{name: "speech text missing", doc: mutate(speech, del("speech.input.text")), kind: KindSpeech, path: "speech.input.text", rule: "required"},
		{name: "speech voice blank", doc: mutate(speech, set("speech.input.voice", "  ")), kind: KindSpeech, path: "speech.input.voice", rule: "must not be blank"},
		{name: "speech mode unknown", doc: mutate(speech, set("speech.mode", "batch")), kind: KindSpeech, path: "speech.mode", rule: "must be one of sync, async, stream"},
		{name: "speech stream_format", doc: mutate(speech, set("speech.stream_format", "sse")), kind: KindSpeech, path: "speech.stream_format", rule: "unknown field"},
		{name: "speech optimize as string", doc: mutate(speech, set("speech.input.optimize_instructions", "true")), kind: KindSpeech, path: "speech.input.optimize_instructions", rule: "must be a boolean"},
		{name: "speech language empty", doc: mutate(speech, set("speech.input.language_type", "")), kind: KindSpeech, path: "speech.input.language_type", rule: "must not be empty when given"},
		{name: "speech input unknown field", doc: mutate(speech, set("speech.input.speed", 1.2)), kind: KindSpeech, path: "speech.input.speed", rule: "unknown field"},

		// Compute.
		{name: "cluster empty", doc: mutate(compute, set("compute.cluster", "")), kind: KindCompute, path: "compute.cluster", rule: "must not be empty when given"},
		{name: "template type missing", doc: mutate(compute, del("compute.template.type")), kind: KindCompute, path: "compute.template.type", rule: "required"},
		{name: "template name with slash", doc: mutate(compute, set("compute.template.name", "BASE/x")), kind: KindCompute, path: "compute.template.name", rule: "one URL path segment"},
		{name: "template name dot-dot", doc: mutate(compute, set("compute.template.name", "..")), kind: KindCompute, path: "compute.template.name", rule: "one URL path segment"},
		{name: "template type too long", doc: mutate(compute, set("compute.template.type", strings.Repeat("T", 129))), kind: KindCompute, path: "compute.template.type", rule: "at most 128 bytes"},
		{name: "job unknown field", doc: mutate(compute, set("compute.job.nnodes", 2)), kind: KindCompute, path: "compute.job.nnodes", rule: "unknown field"},
		{name: "queue missing", doc: mutate(compute, del("compute.job.queue")), kind: KindCompute, path: "compute.job.queue", rule: "required (or job.extra.GAP_QUEUE)"},
		{name: "nodes missing", doc: mutate(compute, del("compute.job.nodes")), kind: KindCompute, path: "compute.job.nodes", rule: "required (or job.extra.GAP_NNODE)"},
		{name: "nodes zero", doc: mutate(compute, set("compute.job.nodes", 0)), kind: KindCompute, path: "compute.job.nodes", rule: "must be a positive integer"},
		{name: "ppn negative", doc: mutate(compute, set("compute.job.ppn", -1)), kind: KindCompute, path: "compute.job.ppn", rule: "must be a positive integer"},
		{name: "ppn missing", doc: mutate(compute, del("compute.job.ppn")), kind: KindCompute, path: "compute.job.ppn", rule: "required"},
		{name: "script missing", doc: mutate(compute, del("compute.job.script")), kind: KindCompute, path: "compute.job.script", rule: "required (or job.extra.GAP_SCHED_FILE)"},
		{name: "wall time missing", doc: mutate(compute, del("compute.job.wall_time")), kind: KindCompute, path: "compute.job.wall_time", rule: "required"},
		{name: "wall time one-digit hours", doc: mutate(compute, set("compute.job.wall_time", "1:00:00")), kind: KindCompute, path: "compute.job.wall_time", rule: "HH:MM:SS"},
		{name: "wall time 60 minutes", doc: mutate(compute, set("compute.job.wall_time", "10:60:00")), kind: KindCompute, path: "compute.job.wall_time", rule: "HH:MM:SS"},
		{name: "wall time zero", doc: mutate(compute, set("compute.job.wall_time", "00:00:00")), kind: KindCompute, path: "compute.job.wall_time", rule: "longer than zero"},
		{name: "gpus negative", doc: mutate(compute, set("compute.job.gpus", -1)), kind: KindCompute, path: "compute.job.gpus", rule: "non-negative integer"},
		{name: "dcus as string", doc: mutate(compute, set("compute.job.dcus", "2")), kind: KindCompute, path: "compute.job.dcus", rule: "got a string"},
		{name: "gui boolean", doc: mutate(compute, set("compute.job.gui", true)), kind: KindCompute, path: "compute.job.gui", rule: "got a boolean"},
		{name: "advance string", doc: mutate(compute, set("compute.job.advance", "yes")), kind: KindCompute, path: "compute.job.advance", rule: "must be a boolean"},
		{name: "mem number", doc: mutate(compute, set("compute.job.mem", 64)), kind: KindCompute, path: "compute.job.mem", rule: "must be a string"},
		{name: "extra key without GAP_", doc: mutate(extra, set("compute.job.extra.QUEUE", "q")), kind: KindCompute, path: "compute.job.extra.QUEUE", rule: "must match ^GAP_"},
		{name: "extra value number", doc: mutate(extra, set("compute.job.extra.GAP_NNODE", 1)), kind: KindCompute, path: "compute.job.extra.GAP_NNODE", rule: "must be a string"},
		{name: "extra cluster id", doc: mutate(extra, set("compute.job.extra.GAP_CLUSTER_ID", "c-1")), kind: KindCompute, path: "compute.job.extra.GAP_CLUSTER_ID", rule: "cannot be overridden"},
		{name: "inputs not an array", doc: mutate(compute, set("compute.inputs", map[string]any{})), kind: KindCompute, path: "compute.inputs", rule: "must be an array"},
		{name: "input from http", doc: mutate(compute, set("compute.inputs[1].from", "http://e.test/a")), kind: KindCompute, path: "compute.inputs[1].from", rule: "s3://bucket/key or an https:// URL"},
		{name: "input from bad bucket", doc: mutate(compute, set("compute.inputs[0].from", "s3://a..b/k")), kind: KindCompute, path: "compute.inputs[0].from", rule: "adjacent dots"},
		{name: "input from IP bucket", doc: mutate(compute, set("compute.inputs[0].from", "s3://192.168.1.1/k")), kind: KindCompute, path: "compute.inputs[0].from", rule: "IP address"},
		{name: "input to relative", doc: mutate(compute, set("compute.inputs[0].to", "run-1")), kind: KindCompute, path: "compute.inputs[0].to", rule: "absolute path"},
		{name: "input to dot-dot", doc: mutate(compute, set("compute.inputs[0].to", "/home/../etc")), kind: KindCompute, path: "compute.inputs[0].to", rule: `".." segment`},
		{name: "input to missing", doc: mutate(compute, del("compute.inputs[0].to")), kind: KindCompute, path: "compute.inputs[0].to", rule: "required"},
		{name: "input cover string", doc: mutate(compute, set("compute.inputs[0].cover", "true")), kind: KindCompute, path: "compute.inputs[0].cover", rule: "must be a boolean"},
		{name: "compute input unknown field", doc: mutate(compute, set("compute.inputs[0].mode", "0644")), kind: KindCompute, path: "compute.inputs[0].mode", rule: "unknown field"},
		{name: "output relative", doc: mutate(compute, set("compute.outputs[0]", "result.nc")), kind: KindCompute, path: "compute.outputs[0]", rule: "absolute path"},
		{name: "output dot-dot", doc: mutate(compute, set("compute.outputs[1]", "/home/alice/../bob/x")), kind: KindCompute, path: "compute.outputs[1]", rule: `".." segment`},
		{name: "output directory", doc: mutate(compute, set("compute.outputs[0]", "/home/alice/")), kind: KindCompute, path: "compute.outputs[0]", rule: "no trailing"},
		{name: "output not a string", doc: mutate(compute, set("compute.outputs[0]", false)), kind: KindCompute, path: "compute.outputs[0]", rule: "must be a string"},
	}
}

func readExampleFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", "examples", name+".json"))
}

// TestDecodeInvalid decodes specs that each break one rule and checks the
// problem names the field and the rule.
func TestDecodeInvalid(t *testing.T) {
	t.Parallel()
	cases := invalidCases(t)
	if len(cases) < 60 {
		t.Fatalf("only %d invalid cases", len(cases))
	}
	seen := map[string]bool{}
	for _, tt := range cases {
		if seen[tt.name] {
			t.Fatalf("duplicate case name %q", tt.name)
		}
		seen[tt.name] = true
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec, err := Decode([]byte(tt.doc), tt.kind)
			if err == nil {
				t.Fatalf("Decode accepted:\n%s", tt.doc)
			}
			if !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("errors.Is(err, ErrInvalidSpec) = false")
			}
			var se *Error
			if !errors.As(err, &se) {
				t.Fatalf("error %T is not *Error", err)
			}
			// One broken rule, one problem: nothing reported twice, no
			// problem that only follows from another.
			if len(se.Problems) != 1 || se.Problems[0].Path != tt.path || !strings.Contains(se.Problems[0].Rule, tt.rule) {
				t.Errorf("want exactly %s: ...%s...\ngot: %v", tt.path, tt.rule, err)
			}
			// A spec is returned whenever the bytes are one JSON object.
			isObject := json.Valid([]byte(tt.doc)) && bytes.HasPrefix(bytes.TrimSpace([]byte(tt.doc)), []byte("{")) && len(tt.doc) <= MaxSpecBytes
			if (spec != nil) != isObject {
				t.Errorf("spec = %v, want non-nil %v", spec, isObject)
			}
		})
	}
}

// TestDecodeReportsAllProblems checks that one Decode reports every broken
// rule, in document order, and not the first only.
func TestDecodeReportsAllProblems(t *testing.T) {
	t.Parallel()
	doc := `{
		"version": 1,
		"id": "clip 7",
		"kind": "video",
		"labels": {"": "x"},
		"output": {"prefix": "../up"},
		"video": {
			"model": "",
			"input": {
				"prompt": "boat",
				"media": [
					{"type": "first_frame", "url": "https://e.test/f.png"},
					{"type": "reference_image", "url": "ftp://e.test/r.png"}
				],
				"extra": 1
			},
			"parameters": {"resolution": "4K", "duration": 5.5, "ratio": "2:1"}
		}
	}`
	_, err := Decode([]byte(doc), KindVideo)
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v", err)
	}
	want := []Problem{
		{"id", "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"},
		{"video.input.extra", "unknown field"},
		{"video.parameters.duration", "must be an integer number of seconds"},
		{`labels[""]`, "key must not be empty"},
		{"output.prefix", `must not have a "." or ".." segment`},
		{"video.model", "required (must not be empty)"},
		{"video.input.media[1]", "role reference_image cannot be combined with first_frame"},
		{"video.input.media[1].url", "must be an http(s) URL, a base64 data URI (data:<mime>;base64,<payload>) or s3://bucket/key"},
		{"video.parameters.resolution", `must be one of 768P, 2K, 720p, 1080p, got "4K"`},
		{"video.parameters.ratio", `must be one of adaptive, 21:9, 16:9, 4:3, 1:1, 3:4, 9:16, got "2:1"`},
	}
	if len(se.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(se.Problems), len(want), err)
	}
	for i := range want {
		if se.Problems[i] != want[i] {
			t.Errorf("problem %d = %q, want %q", i, se.Problems[i], want[i])
		}
	}
	if !strings.HasPrefix(err.Error(), "id: must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$; video.input.extra: unknown field; ") {
		t.Errorf("Error() = %s", err)
	}
}

// TestErrorMessageBounded checks that a document with thousands of problems
// still gives a one-line message of bounded length.
func TestErrorMessageBounded(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"kind":"speech","speech":{"model":"m","input":{"text":"t","voice":"v"}}`)
	for i := range 5000 {
		b.WriteString(`,"unknown_` + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + `_` + strconv.Itoa(i) + `":1`)
	}
	b.WriteString("}")
	_, err := Decode([]byte(b.String()), KindSpeech)
	var se *Error
	if !errors.As(err, &se) || len(se.Problems) != 5000 {
		t.Fatalf("err = %T with %d problems", err, len(se.Problems))
	}
	msg := err.Error()
	if len(msg) > 4096 || strings.Contains(msg, "\n") || !strings.HasSuffix(msg, "; and 4980 more problems") {
		t.Errorf("message of %d bytes: ...%s", len(msg), msg[max(0, len(msg)-80):])
	}
}

// TestErrorsHideSecrets checks that no problem repeats a URL, its
// credentials or its presigned query.
func TestErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	const secret = "SECRETSIG"
	base := string(readExample(t, "image-to-video-first-frame"))
	urls := []string{
		"https://user:" + secret + "@e.test/a.png?X-Amz-Signature=" + secret,
		"ftp://e.test/a.png?X-Amz-Signature=" + secret,
		"https://e.test/a b.png?X-Amz-Signature=" + secret,
		"data:audio/mpeg;base64," + secret,
		"data:image/png;base64," + secret + "!",
		"s3://" + secret + "/k",
		"s3://bucket",
		secret,
	}
	for _, u := range urls {
		for _, doc := range []string{
			mutate(base, set("video.input.media[0].url", u)),
			mutate(string(readExample(t, "compute")), set("compute.inputs[0].from", u)),
		} {
			_, err := Decode([]byte(doc), "")
			if err == nil {
				t.Fatalf("accepted %q", u)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "e.test") {
				t.Errorf("error repeats the URL: %v", err)
			}
		}
	}
}
