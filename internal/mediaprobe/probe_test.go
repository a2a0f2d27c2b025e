package mediaprobe

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

func TestProbeFixtures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file   string
		kind   Kind // the role's kind the file is checked against
		format Format
		w, h   int
		dur    time.Duration
		fps    float64
		vcodec string
		acodec string
		limit  string // "" when every limit holds
		msg    string // substring of the limit's message
	}{
		{file: "image-384x256.jpg", kind: KindImage, format: FormatJPEG, w: 384, h: 256},
		{file: "image-384x256.png", kind: KindImage, format: FormatPNG, w: 384, h: 256},
		{file: "image-384x256.webp", kind: KindImage, format: FormatWEBP, w: 384, h: 256},
		{file: "image-384x256.heic", kind: KindImage, format: FormatHEIF, w: 384, h: 256},
		{file: "image-200x180.jpg", kind: KindImage, format: FormatJPEG, w: 200, h: 180, limit: "dimensions",
			msg: "image is 200x180 px, want width and height in [256, 5760]"},
		{file: "image-384x256.gif", kind: KindImage, format: FormatGIF, limit: "format", msg: "content is GIF, want image"},
		// The name says JPEG, the bytes say PNG: the bytes win.
		{file: "image-disguised.jpg", kind: KindImage, format: FormatPNG, w: 384, h: 256},
		{file: "image-disguised.png", kind: KindImage, format: FormatGIF, limit: "format", msg: "content is GIF"},
		{file: "video-h264-aac-2s.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 2 * time.Second, fps: 30, vcodec: "H.264", acodec: "AAC"},
		{file: "video-h264-1.9s.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 1900 * time.Millisecond, fps: 30, vcodec: "H.264",
			limit: "duration", msg: "video is 1.9 s long, want each clip in [2, 15] s"},
		{file: "video-h264-15s.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 15 * time.Second, fps: 30, vcodec: "H.264"},
		{file: "video-h264-15.1s.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 15100 * time.Millisecond, fps: 30, vcodec: "H.264",
			limit: "duration", msg: "video is 15.1 s long"},
		{file: "video-23.976fps.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 3003 * time.Millisecond, fps: 23.976, vcodec: "H.264"},
		{file: "video-23.9fps.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 3013 * time.Millisecond, fps: 23.9, vcodec: "H.264",
			limit: "frame_rate", msg: "video frame rate is 23.900 fps, want [23.976, 60]"},
		{file: "video-60fps.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 3 * time.Second, fps: 60, vcodec: "H.264"},
		{file: "video-61fps.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 3 * time.Second, fps: 61, vcodec: "H.264",
			limit: "frame_rate", msg: "61.000 fps"},
		{file: "video-255x256.mp4", kind: KindVideo, format: FormatMP4, w: 255, h: 256, dur: 2 * time.Second, fps: 30, vcodec: "H.264",
			limit: "dimensions", msg: "video is 255x256 px"},
		{file: "video-moov-at-end.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 3 * time.Second, fps: 30, vcodec: "H.264", acodec: "AAC"},
		{file: "video-h265-mp3.mov", kind: KindVideo, format: FormatMOV, w: 256, h: 256, dur: 3 * time.Second, fps: 30, vcodec: "H.265", acodec: "MP3"},
		{file: "video-mpeg4.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 3 * time.Second, fps: 30, vcodec: `MPEG-4 Part 2 ("mp4v")`,
			limit: "video_codec", msg: "want H.264 or H.265"},
		{file: "video-h264-ac3.mp4", kind: KindVideo, format: FormatMP4, w: 256, h: 256, dur: 3 * time.Second, fps: 30, vcodec: "H.264", acodec: `AC-3 ("ac-3")`,
			limit: "audio_codec", msg: "want AAC or MP3"},
		// A video where an image belongs.
		{file: "video-h264-aac-2s.mp4", kind: KindImage, format: FormatMP4, w: 256, h: 256, dur: 2 * time.Second, fps: 30, vcodec: "H.264", acodec: "AAC",
			limit: "format", msg: "content is MP4 video, want image (JPEG, PNG, WEBP or HEIC/HEIF)"},
		{file: "audio-2s.wav", kind: KindAudio, format: FormatWAV, dur: 2 * time.Second},
		{file: "audio-1.9s.wav", kind: KindAudio, format: FormatWAV, dur: 1900 * time.Millisecond, limit: "duration", msg: "audio is 1.9 s long"},
		{file: "audio-15s.mp3", kind: KindAudio, format: FormatMP3, dur: 15 * time.Second},
		{file: "audio-15.1s.mp3", kind: KindAudio, format: FormatMP3, dur: 15101 * time.Millisecond, limit: "duration", msg: "audio is 15.101 s long"},
		{file: "audio-3s-cbr-no-xing.mp3", kind: KindAudio, format: FormatMP3, dur: 3057 * time.Millisecond},
		{file: "audio-3s.ogg", kind: KindAudio, format: FormatOgg, limit: "format", msg: "content is Ogg, want audio (WAV or MP3)"},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+string(tt.kind), func(t *testing.T) {
			t.Parallel()
			b := fixture(t, tt.file)
			info, err := Probe(bytes.NewReader(b), int64(len(b)))
			if tt.format.Kind() != "" && err != nil {
				t.Fatalf("Probe: %v", err)
			}
			if tt.format.Kind() == "" && !errors.Is(err, ErrUnsupportedFormat) {
				t.Fatalf("Probe error = %v, want ErrUnsupportedFormat", err)
			}
			if info.Format != tt.format || info.Width != tt.w || info.Height != tt.h || info.Size != int64(len(b)) {
				t.Errorf("Probe = %s %dx%d %d bytes, want %s %dx%d %d bytes", info.Format, info.Width, info.Height, info.Size, tt.format, tt.w, tt.h, len(b))
			}
			if got := info.Duration.Round(time.Millisecond); got != tt.dur {
				t.Errorf("Duration = %v, want %v", got, tt.dur)
			}
			if got := float64(int(info.FrameRate*1000+0.5)) / 1000; got != tt.fps {
				t.Errorf("FrameRate = %v, want %v", info.FrameRate, tt.fps)
			}
			if info.VideoCodec != tt.vcodec || strings.Join(info.AudioCodecs, ",") != tt.acodec {
				t.Errorf("codecs = %q %q, want %q %q", info.VideoCodec, info.AudioCodecs, tt.vcodec, tt.acodec)
			}
			le := Check(tt.kind, info)
			switch {
			case tt.limit == "" && le != nil:
				t.Errorf("Check = %v, want every limit to hold", le)
			case tt.limit != "" && le == nil:
				t.Errorf("Check = nil, want the %s limit broken", tt.limit)
			case tt.limit != "" && (le.Limit != tt.limit || !strings.Contains(le.Message, tt.msg)):
				t.Errorf("Check = %s: %q, want %s: %q", le.Limit, le.Message, tt.limit, tt.msg)
			}
		})
	}
}

// TestCheckBounds checks every limit at its bound and just past it.
func TestCheckBounds(t *testing.T) {
	t.Parallel()
	img := func(w, h int) Info { return Info{Format: FormatPNG, Size: 1000, Width: w, Height: h} }
	vid := func(mut func(*Info)) Info {
		i := Info{Format: FormatMP4, Size: 1000, Width: 1280, Height: 720, Duration: 5 * time.Second, FrameRate: 30, VideoCodec: "H.264", AudioCodecs: []string{"AAC"}}
		mut(&i)
		return i
	}
	aud := func(d time.Duration, size int64) Info { return Info{Format: FormatWAV, Size: size, Duration: d} }
	tests := []struct {
		name  string
		kind  Kind
		info  Info
		limit string
		msg   string
	}{
		{"256 px", KindImage, img(256, 256), "", ""},
		{"255 px wide", KindImage, img(255, 256), "dimensions", "image is 255x256 px, want width and height in [256, 5760]"},
		{"255 px high", KindImage, img(300, 255), "dimensions", "image is 300x255 px"},
		{"5760 px", KindImage, img(5760, 5760), "", ""},
		{"5761 px", KindImage, img(5761, 5760), "dimensions", "image is 5761x5760 px"},
		{"aspect 0.4", KindImage, img(256, 640), "", ""},
		{"aspect 0.39", KindImage, img(256, 657), "aspect", "image aspect ratio is 0.39 (256x657 px), want [0.4, 2.5]"},
		{"aspect just under 0.4", KindImage, img(400, 1001), "aspect", "aspect ratio is 0.3996"},
		{"aspect 2.5", KindImage, img(640, 256), "", ""},
		{"aspect 2.51", KindImage, img(643, 256), "aspect", "aspect ratio is 2.51"},
		{"image 30 MB", KindImage, Info{Format: FormatJPEG, Size: 30 << 20, Width: 300, Height: 300}, "", ""},
		{"image 30 MB+1", KindImage, Info{Format: FormatJPEG, Size: 30<<20 + 1, Width: 300, Height: 300}, "size", "image file is 31457281 bytes, want at most 31457280 (30 MB)"},
		{"video 50 MB", KindVideo, vid(func(i *Info) { i.Size = 50 << 20 }), "", ""},
		{"video 50 MB+1", KindVideo, vid(func(i *Info) { i.Size = 50<<20 + 1 }), "size", "video file is 52428801 bytes, want at most 52428800 (50 MB)"},
		{"audio 15 MB", KindAudio, aud(5*time.Second, 15<<20), "", ""},
		{"audio 15 MB+1", KindAudio, aud(5*time.Second, 15<<20+1), "size", "audio file is 15728641 bytes"},
		{"video 255 px", KindVideo, vid(func(i *Info) { i.Width = 255 }), "dimensions", "video is 255x720 px"},
		{"video aspect 2.5", KindVideo, vid(func(i *Info) { i.Width, i.Height = 1600, 640 }), "", ""},
		{"video aspect 0.39", KindVideo, vid(func(i *Info) { i.Width, i.Height = 256, 657 }), "aspect", "video aspect ratio is 0.39"},
		{"clip 2.0 s", KindVideo, vid(func(i *Info) { i.Duration = 2 * time.Second }), "", ""},
		{"clip 1.9 s", KindVideo, vid(func(i *Info) { i.Duration = 1900 * time.Millisecond }), "duration", "video is 1.9 s long, want each clip in [2, 15] s"},
		{"clip 1.9995 s rounds to 2", KindVideo, vid(func(i *Info) { i.Duration = 1999500 * time.Microsecond }), "", ""},
		{"clip 15 s", KindVideo, vid(func(i *Info) { i.Duration = 15 * time.Second }), "", ""},
		{"clip 15.1 s", KindVideo, vid(func(i *Info) { i.Duration = 15100 * time.Millisecond }), "duration", "video is 15.1 s long"},
		{"clip 15.001 s", KindVideo, vid(func(i *Info) { i.Duration = 15001 * time.Millisecond }), "duration", "video is 15.001 s long"},
		{"audio 2.0 s", KindAudio, aud(2*time.Second, 100), "", ""},
		{"audio 1.9 s", KindAudio, aud(1900*time.Millisecond, 100), "duration", "audio is 1.9 s long"},
		{"audio 15.1 s", KindAudio, aud(15100*time.Millisecond, 100), "duration", "audio is 15.1 s long"},
		{"23.976 fps", KindVideo, vid(func(i *Info) { i.FrameRate = 23.976 }), "", ""},
		{"24000/1001 fps", KindVideo, vid(func(i *Info) { i.FrameRate = 24000.0 / 1001 }), "", ""},
		{"23.9 fps", KindVideo, vid(func(i *Info) { i.FrameRate = 23.9 }), "frame_rate", "video frame rate is 23.900 fps, want [23.976, 60]"},
		{"23.975 fps", KindVideo, vid(func(i *Info) { i.FrameRate = 23.975 }), "frame_rate", "23.975 fps"},
		{"60 fps", KindVideo, vid(func(i *Info) { i.FrameRate = 60 }), "", ""},
		{"60.1 fps", KindVideo, vid(func(i *Info) { i.FrameRate = 60.1 }), "frame_rate", "60.100 fps"},
		{"H.265", KindVideo, vid(func(i *Info) { i.VideoCodec = "H.265" }), "", ""},
		{"VP9", KindVideo, vid(func(i *Info) { i.VideoCodec = `VP9 ("vp09")` }), "video_codec", `video codec is VP9 ("vp09"), want H.264 or H.265`},
		{"MP3 audio track", KindVideo, vid(func(i *Info) { i.AudioCodecs = []string{"MP3"} }), "", ""},
		{"no audio track", KindVideo, vid(func(i *Info) { i.AudioCodecs = nil }), "", ""},
		{"Opus audio track", KindVideo, vid(func(i *Info) { i.AudioCodecs = []string{"AAC", `Opus ("Opus")`} }), "audio_codec", `video's audio codec is Opus ("Opus"), want AAC or MP3`},
		{"audio where a video belongs", KindVideo, aud(3*time.Second, 100), "format", "content is WAV audio, want video (MP4 or MOV)"},
		{"unknown where audio belongs", KindAudio, Info{Size: 10}, "format", "content is of no known media format, want audio (WAV or MP3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			le := Check(tt.kind, tt.info)
			switch {
			case tt.limit == "" && le != nil:
				t.Errorf("Check = %v, want nil", le)
			case tt.limit != "" && le == nil:
				t.Errorf("Check = nil, want the %s limit", tt.limit)
			case tt.limit != "" && (le.Limit != tt.limit || !strings.Contains(le.Message, tt.msg)):
				t.Errorf("Check = %s: %q, want %s: %q", le.Limit, le.Message, tt.limit, tt.msg)
			}
		})
	}
}

func TestCheckTotal(t *testing.T) {
	t.Parallel()
	// Durations as the fixtures measure them: 2 s + 13 s and 2 s + 13.1 s.
	probe := func(name string) time.Duration {
		b := fixture(t, name)
		info, err := Probe(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("Probe %s: %v", name, err)
		}
		return info.Duration
	}
	two := probe("video-h264-aac-2s.mp4")
	if le := CheckTotal(KindVideo, two+probe("video-h264-13s.mp4"), 2); le != nil {
		t.Errorf("15 s total: %v, want nil", le)
	}
	le := CheckTotal(KindVideo, two+probe("video-h264-13.1s.mp4"), 2)
	if le == nil || le.Limit != "total" || le.Message != "the 2 video clips total 15.1 s, want at most 15 s" {
		t.Errorf("15.1 s total: %v, want the total limit", le)
	}
	if le := CheckTotal(KindAudio, 15100*time.Millisecond, 3); le == nil || !strings.Contains(le.Message, "3 audio clips total 15.1 s") {
		t.Errorf("audio 15.1 s total: %v", le)
	}
}

// TestProbeLargeFiles probes files of the size limits without holding
// them: a PNG header followed by padding, and a 50 MB MP4 whose moov sits
// after its media data. The probe must read a few kilobytes of them.
func TestProbeLargeFiles(t *testing.T) {
	t.Parallel()
	for _, size := range []int64{30 << 20, 30<<20 + 1} {
		f := &counting{r: testmedia.NewSparse(size).Put(0, pngHeader(1024, 768))}
		info, err := Probe(f, size)
		if err != nil {
			t.Fatalf("Probe %d bytes: %v", size, err)
		}
		le := Check(KindImage, info)
		if (size > MaxImageBytes) != (le != nil) || (le != nil && le.Limit != "size") {
			t.Errorf("%d-byte image: Check = %v", size, le)
		}
		if n := f.bytes.Load(); n > 64<<10 {
			t.Errorf("%d-byte image: read %d bytes", size, n)
		}
	}
	fix := fixture(t, "video-moov-at-end.mp4")
	for _, size := range []int64{50 << 20, 50<<20 + 1} {
		f := &counting{r: testmedia.LargeMovie(t, fix, size)}
		info, err := Probe(f, size)
		if err != nil {
			t.Fatalf("Probe %d bytes: %v", size, err)
		}
		if info.Width != 256 || info.VideoCodec != "H.264" {
			t.Errorf("Probe = %+v", info)
		}
		le := Check(KindVideo, info)
		if (size > MaxVideoBytes) != (le != nil) || (le != nil && le.Limit != "size") {
			t.Errorf("%d-byte video: Check = %v", size, le)
		}
		if n := f.bytes.Load(); n > 64<<10 {
			t.Errorf("%d-byte video: read %d bytes in %d reads, want a few kilobytes", size, n, f.calls.Load())
		}
	}
}

func TestProbeTruncated(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		file string
		keep int
		msg  string
	}{
		{"video-moov-at-end.mp4", -2000, "truncated"},
		{"video-h264-aac-2s.mp4", 600, "truncated"},
		{"image-384x256.png", 20, "truncated"},
		{"image-384x256.jpg", 100, "truncated"},
		{"image-384x256.webp", 16, ""},
		{"image-384x256.heic", 300, ""},
		{"audio-2s.wav", 30, "truncated"}, {"audio-2s.wav", 40, "no data chunk"},
		{"audio-2s.wav", 20000, "truncated"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			b := fixture(t, tt.file)
			n := tt.keep
			if n < 0 {
				n += len(b)
			}
			b = b[:n]
			_, err := Probe(bytes.NewReader(b), int64(len(b)))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Probe of %d bytes = %v, want ErrMalformed mentioning %q", n, err, tt.msg)
			}
		})
	}
}

// failing fails every read past its first n bytes.
type failing struct {
	r io.ReaderAt
	n int64
}

func (f failing) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.n {
		return 0, errBroken
	}
	return f.r.ReadAt(p, off)
}

var errBroken = errors.New("connection reset")

func TestProbeReadError(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"video-moov-at-end.mp4", "image-384x256.jpg", "audio-15s.mp3", "image-384x256.heic", "audio-2s.wav"} {
		b := fixture(t, name)
		_, err := Probe(failing{r: bytes.NewReader(b), n: 30}, int64(len(b)))
		if !IsReadError(err) || !errors.Is(err, errBroken) {
			t.Errorf("%s: Probe = %v, want the reader's error", name, err)
		}
	}
}
