package jobspec

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestDecodeExamples decodes every scenario's example and compares the
// upstream body it builds with the exact JSON upstream must receive.
func TestDecodeExamples(t *testing.T) {
	t.Parallel()

	target := ComputeTarget{SchedulerID: "1001", ClusterID: "c-77"}
	tests := []struct {
		name     string
		kind     Kind
		scenario VideoScenario // video only
		mode     SpeechMode    // speech only
		want     string
	}{
		{
			name: "text-to-video", kind: KindVideo, scenario: ScenarioTextToVideo,
			want: `{"model":"video-model-name",
				"input":{"prompt":"a paper boat drifting down a rain gutter, morning light"},
				"parameters":{"resolution":"768P","duration":5,"ratio":"16:9","watermark":false}}`,
		},
		{
			name: "image-to-video-first-frame", kind: KindVideo, scenario: ScenarioImageToVideo,
			want: `{"model":"video-model-name",
				"input":{"prompt":"a paper boat drifting down a rain gutter",
					"media":[{"type":"first_frame","url":"https://example.test/boat.png"}]},
				"parameters":{"resolution":"768P","duration":5,"watermark":false}}`,
		},
		{
			name: "image-to-video-last-frame", kind: KindVideo, scenario: ScenarioImageToVideo,
			want: `{"model":"video-model-name",
				"input":{"prompt":"the boat reaches the storm drain",
					"media":[{"type":"last_frame","url":"s3://media-in/frames/drain.png"}]},
				"parameters":{"resolution":"2K","duration":10}}`,
		},
		{
			name: "image-to-video-first-last-frame", kind: KindVideo, scenario: ScenarioImageToVideo,
			want: `{"model":"video-model-name",
				"input":{"prompt":"the boat drifts from the gutter into the drain",
					"media":[{"type":"first_frame","url":"https://example.test/gutter.png"},
						{"type":"last_frame","url":"data:image/png;base64,iVBORw0KGgo="}]},
				"parameters":{"resolution":"768P","duration":8,"ratio":"adaptive","watermark":true}}`,
		},
		{
			name: "image-to-video-images", kind: KindVideo, scenario: ScenarioImageToVideo,
			want: `{"model":"video-model-name",
				"input":{"prompt":"the boat spins slowly","images":["https://example.test/boat.png"]},
				"parameters":{"resolution":"768P","duration":4}}`,
		},
		{
			name: "multimodal-reference", kind: KindVideo, scenario: ScenarioReference,
			want: `{"model":"video-model-name",
				"input":{"prompt":"the characters of the reference images sail the boat, in the style of the reference videos, to the reference music",
					"media":[
						{"type":"reference_image","url":"https://example.test/ref/image-1.png"},
						{"type":"reference_image","url":"https://example.test/ref/image-2.png"},
						{"type":"reference_image","url":"https://example.test/ref/image-3.png"},
						{"type":"reference_image","url":"https://example.test/ref/image-4.png"},
						{"type":"reference_image","url":"https://example.test/ref/image-5.png"},
						{"type":"reference_image","url":"https://example.test/ref/image-6.png"},
						{"type":"reference_image","url":"https://example.test/ref/image-7.png"},
						{"type":"reference_image","url":"https://example.test/ref/image-8.png"},
						{"type":"reference_image","url":"https://example.test/ref/image-9.png"},
						{"type":"reference_video","url":"s3://media-in/ref/video-1.mp4"},
						{"type":"reference_video","url":"s3://media-in/ref/video-2.mp4"},
						{"type":"reference_video","url":"s3://media-in/ref/video-3.mp4"},
						{"type":"reference_audio","url":"https://example.test/ref/audio-1.mp3"},
						{"type":"reference_audio","url":"https://example.test/ref/audio-2.mp3"},
						{"type":"reference_audio","url":"https://example.test/ref/audio-3.mp3"}]},
				"parameters":{"resolution":"2K","duration":15,"ratio":"9:16","watermark":false}}`,
		},
		{
			name: "speech-sync", kind: KindSpeech, mode: ModeSync,
			want: `{"model":"speech-model-name","input":{"text":"Spring is here.","voice":"voice-a"}}`,
		},
		{
			name: "speech-async", kind: KindSpeech, mode: ModeAsync,
			want: `{"model":"speech-model-name","input":{"text":"Welcome aboard the paper boat.","voice":"voice-b",
				"language_type":"English","instructions":"warm and slow, like a bedtime story","optimize_instructions":true}}`,
		},
		{
			name: "speech-stream", kind: KindSpeech, mode: ModeStream,
			want: `{"model":"speech-model-name","input":{"text":"Streaming, one increment at a time.","voice":"voice-a",
				"language_type":"English"},"stream_format":"sse"}`,
		},
		{
			name: "compute", kind: KindCompute,
			want: `{"strJobManagerID":"1001","mapAppJobInfo":{
				"GAP_JOB_NAME":"hydro-run-1","GAP_SUBMIT_TYPE":"cmd","GAP_QUEUE":"normal",
				"GAP_NNODE":"2","GAP_PPN":"32","GAP_WALL_TIME":"36:00:00",
				"GAP_WORK_DIR":"/home/alice/hydro/run-1","GAP_SCHED_FILE":"/home/alice/hydro/run.sh",
				"GAP_STD_OUT_FILE":"/home/alice/hydro/run-1/std.out","GAP_STD_ERR_FILE":"/home/alice/hydro/run-1/std.err",
				"GAP_NGPU":"0","GAP_NDCU":"","GAP_JOB_MEM":"64GB","GAP_NODE_TYPE":"","GAP_MULTI_SUB":"",
				"GAP_CLUSTER_ID":"c-77","GAP_GUI":0,"advance":false,"GAP_ACCOUNT":"hydro-lab"}}`,
		},
		{
			name: "compute-extra", kind: KindCompute,
			want: `{"strJobManagerID":"1001","mapAppJobInfo":{
				"GAP_JOB_NAME":"sim-0002","GAP_SCHED_FILE":"/home/alice/hydro/run.sh",
				"GAP_QUEUE":"dcu-queue","GAP_NNODE":"1","GAP_PPN":"8","GAP_WALL_TIME":"01:30:00",
				"GAP_NGPU":"","GAP_NDCU":"4","GAP_JOB_MEM":"32GB","GAP_NODE_TYPE":"","GAP_MULTI_SUB":"",
				"GAP_CLUSTER_ID":"c-77","GAP_GUI":1,"advance":true}}`,
		},
		{name: "pipeline", kind: KindPipeline, want: `["voice","train","render"]`},
	}

	// Every example file has a case here, and every case a file.
	var names []string
	for _, tt := range tests {
		names = append(names, tt.name)
	}
	slices.Sort(names)
	if got := exampleNames(t); !slices.Equal(got, names) {
		t.Fatalf("examples %v, table %v", got, names)
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := readExample(t, tt.name)
			for _, arrival := range []Kind{tt.kind, ""} {
				spec, err := Decode(data, arrival)
				if err != nil {
					t.Fatalf("Decode(%q): %v", arrival, err)
				}
				if spec.Kind != tt.kind || spec.Version != 1 || !ValidID(spec.ID) {
					t.Fatalf("kind %q version %d id %q", spec.Kind, spec.Version, spec.ID)
				}
				if err := spec.Validate(); err != nil {
					t.Fatalf("Validate after Decode: %v", err)
				}
			}
			spec, _ := Decode(data, tt.kind)
			switch tt.kind {
			case KindVideo:
				if got := spec.Video.Scenario(); got != tt.scenario {
					t.Errorf("Scenario() = %s, want %s", got, tt.scenario)
				}
				assertJSON(t, spec.Video.Request(), tt.want)
			case KindSpeech:
				if got := spec.Speech.EffectiveMode(); got != tt.mode {
					t.Errorf("EffectiveMode() = %s, want %s", got, tt.mode)
				}
				assertJSON(t, spec.Speech.Request(), tt.want)
			case KindCompute:
				tgt := target
				tgt.JobID = spec.ID
				assertJSON(t, spec.Compute.Request(tgt), tt.want)
			case KindPipeline:
				assertJSON(t, spec.Pipeline.Order(), tt.want)
			}
		})
	}
}

// TestRoundTrip checks that json.Marshal of a decoded spec decodes to an
// equal spec, and that the marshalled form omits absent fields.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range exampleNames(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec, err := Decode(readExample(t, name), "")
			if err != nil {
				t.Fatal(err)
			}
			out, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Decode(out, spec.Kind)
			if err != nil {
				t.Fatalf("re-decode %s: %v", out, err)
			}
			if !reflect.DeepEqual(spec, again) {
				t.Errorf("round trip differs:\n%+v\n%+v", spec, again)
			}
			if strings.Contains(string(out), "null") || strings.Contains(string(out), `""`) {
				t.Errorf("marshalled spec has an absent field: %s", out)
			}
		})
	}
}

// TestRequestsShareNothing checks that changing a built request leaves the
// spec alone, so the worker can presign URLs in place.
func TestRequestsShareNothing(t *testing.T) {
	t.Parallel()
	spec, err := Decode(readExample(t, "image-to-video-first-last-frame"), KindVideo)
	if err != nil {
		t.Fatal(err)
	}
	r := spec.Video.Request()
	r.Input.Media[0].URL = "https://presigned.example.test/x"
	*r.Parameters.Watermark = false
	if spec.Video.Input.Media[0].URL != "https://example.test/gutter.png" || !*spec.Video.Parameters.Watermark {
		t.Error("Request shares memory with the spec")
	}

	sp, err := Decode(readExample(t, "image-to-video-images"), KindVideo)
	if err != nil {
		t.Fatal(err)
	}
	ri := sp.Video.Request()
	ri.Input.Images[0] = "changed"
	if sp.Video.Input.Images[0] != "https://example.test/boat.png" {
		t.Error("Request shares images with the spec")
	}
}

type validCase struct {
	name string
	doc  string
}

// validEdgeCases are valid documents at the edges of the rules.
func validEdgeCases(t *testing.T) []validCase {
	t.Helper()
	base := string(readExample(t, "text-to-video"))
	first := string(readExample(t, "image-to-video-first-frame"))
	speech := string(readExample(t, "speech-sync"))
	compute := string(readExample(t, "compute"))
	return []validCase{
		{"version absent", mutate(base, del("version"))},
		{"version 1.0", mutate(base, set("version", json.RawMessage("1.0")))},
		{"duration 5.0 is an integer", mutate(base, set("video.parameters.duration", json.RawMessage("5.0")))},
		{"duration 1.5e1", mutate(base, set("video.parameters.duration", json.RawMessage("1.5e1")))},
		{"duration 4", mutate(base, set("video.parameters.duration", 4))},
		{"duration 15", mutate(base, set("video.parameters.duration", 15))},
		{"resolution in another case", mutate(base, set("video.parameters.resolution", "768p"))},
		{"resolution 1080p of public clients", mutate(base, set("video.parameters.resolution", "1080p"))},
		{"tenant and priority", mutate(mutate(base, set("tenant", "team-a_1")), set("priority", 1))},
		{"priority 5", mutate(base, set("priority", 5))},
		{"id absent", mutate(base, del("id"))},
		{"id 128 characters", mutate(base, set("id", strings.Repeat("a", 128)))},
		{"prompt of 7000 multi-byte characters", mutate(base, set("video.input.prompt", strings.Repeat("é", 7000)))},
		{"32 labels", mutate(base, set("labels", labelsOf(32, "k", "v")))},
		{"label key 63 bytes", mutate(base, set("labels", map[string]string{strings.Repeat("k", 63): strings.Repeat("v", 256)}))},
		{"empty label value", mutate(base, set("labels", map[string]string{"k": ""}))},
		{"empty labels object", mutate(base, set("labels", map[string]string{}))},
		{"prefix 512 bytes", mutate(base, set("output.prefix", strings.Repeat("p", 512)))},
		{"prefix with dots inside segments", mutate(base, set("output.prefix", "a.b/..c/d.."))},
		{"output without prefix", mutate(base, set("output", map[string]any{}))},
		{"first frame with a listed ratio", mutate(first, set("video.parameters.ratio", "21:9"))},
		{"reference without ratio", mutate(string(readExample(t, "multimodal-reference")), del("video.parameters.ratio"))},
		{"images plus last_frame", mutate(string(readExample(t, "image-to-video-images")),
			set("video.input.media", []any{map[string]any{"type": "last_frame", "url": "https://example.test/l.png"}}))},
		{"empty media array is text-to-video", mutate(base, set("video.input.media", []any{}))},
		{"http URL", mutate(first, set("video.input.media[0].url", "http://example.test:8080/a.png?x=1#f"))},
		{"reference_video data URI", mutate(string(readExample(t, "multimodal-reference")),
			set("video.input.media[9].url", "data:video/mp4;base64,AAAA"))},
		{"speech without mode", mutate(speech, del("speech.mode"))},
		{"speech mode async", mutate(speech, set("speech.mode", "async"))},
		{"wall time over 24 hours", mutate(compute, set("compute.job.wall_time", "100:59:59"))},
		{"mem empty", mutate(compute, set("compute.job.mem", ""))},
		{"node_type empty", mutate(compute, set("compute.job.node_type", ""))},
		{"no inputs or outputs", mutate(compute, del("compute.inputs"), del("compute.outputs"))},
		{"s3 key with slashes and dots", mutate(compute, set("compute.inputs[0].from", "s3://a.b-c/x/../y z"))},
		{"bucket that only looks like an IP", mutate(compute, set("compute.inputs[0].from", "s3://01.2.3.4/k"))},
		{"extra without friendly names", string(readExample(t, "compute-extra"))},
	}
}

// TestValidSpecEdges decodes valid documents at the edges of the rules.
func TestValidSpecEdges(t *testing.T) {
	t.Parallel()
	for _, tt := range validEdgeCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Decode([]byte(tt.doc), ""); err != nil {
				t.Errorf("Decode: %v\n%s", err, tt.doc)
			}
		})
	}
}

func labelsOf(n int, keyPrefix, value string) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[keyPrefix+strings.Repeat("x", i)] = value
	}
	return m
}
