package apisim_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

func dataURI(mime string, b []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

// TestMediaInputLimits: the simulator fetches every media input at submit
// and refuses one that breaks a limit with a parameter error naming it,
// before any task is created or counted.
func TestMediaInputLimits(t *testing.T) {
	t.Parallel()
	files := testmedia.Serve(t)
	url := func(name string) string { return files.URL + "/media/" + name }
	img := dataURI("image/png", testmedia.Fixture(t, "image-384x256.png"))

	b := setupSim(t, apisim.MediaConfig{})
	media := func(items ...[2]string) string {
		var m []map[string]string
		for _, it := range items {
			m = append(m, map[string]string{"type": it[0], "url": it[1]})
		}
		in, _ := json.Marshal(map[string]any{"prompt": "p", "media": m})
		return `{"model":"m","input":` + string(in) + `,"parameters":{"resolution":"768P","duration":5}}`
	}
	tests := []struct {
		name   string
		body   string
		status int
		param  string
		msg    string
	}{
		{"every kind good", media([2]string{"reference_image", img}, [2]string{"reference_video", url("video-h264-aac-2s.mp4")},
			[2]string{"reference_video", url("video-h265-mp3.mov")}, [2]string{"reference_audio", url("audio-2s.wav")},
			[2]string{"reference_audio", url("audio-3s-cbr-no-xing.mp3")}), 200, "", ""},
		{"first frame too small", media([2]string{"first_frame", dataURI("image/jpeg", testmedia.Fixture(t, "image-200x180.jpg"))}), 400,
			"input.media[0].url", "image is 200x180 px, want width and height in [256, 5760]"},
		{"GIF last frame", media([2]string{"first_frame", img}, [2]string{"last_frame", url("image-disguised.png")}), 400,
			"input.media[1].url", "content is GIF"},
		{"23.9 fps video", media([2]string{"reference_video", url("video-23.9fps.mp4")}), 400, "input.media[0].url", "23.900 fps"},
		{"video total 15.1 s", media([2]string{"reference_video", url("video-h264-aac-2s.mp4")}, [2]string{"reference_video", url("video-h264-13.1s.mp4")}), 400,
			"input.media", "the 2 video clips total 15.1 s"},
		{"unreachable", media([2]string{"reference_image", url("missing.png")}), 400, "input.media[0].url", "cannot fetch the image"},
		{"s3 address", media([2]string{"reference_image", "s3://bucket/key.png"}), 400, "input.media[0].url", "http(s) URL or a base64 data URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := b.sim.Counters().Snapshot()
			a := b.call(t, "POST", "/api/llm/v1/videos/generations", tt.body, asyncHdr)
			if a.status != tt.status {
				t.Fatalf("status %d, want %d: %s", a.status, tt.status, a.body)
			}
			if tt.status == 200 {
				return
			}
			var e struct {
				Error struct{ Param, Message, Code string }
			}
			if err := json.Unmarshal(a.body, &e); err != nil {
				t.Fatal(err)
			}
			if e.Error.Param != tt.param || !strings.Contains(e.Error.Message, tt.msg) || e.Error.Code != "invalid_parameter" {
				t.Errorf("error = %+v, want param %s and %q", e.Error, tt.param, tt.msg)
			}
			for k, v := range b.sim.Counters().Snapshot() {
				if strings.HasPrefix(k, "submits:") && v != before[k] {
					t.Errorf("refused submit counted as %s", k)
				}
			}
		})
	}
}
