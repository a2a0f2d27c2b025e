package mediaprobe

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// Input media limits of spec/media-api.md 2.4 and 8.
const (
	MB            = 1 << 20
	MaxImageBytes = 30 * MB
	MaxVideoBytes = 50 * MB
	MaxAudioBytes = 15 * MB
	MinSide       = 256
	MaxSide       = 5760
	MinAspect     = 0.4
	MaxAspect     = 2.5
	MinClip       = 2 * time.Second
	MaxClip       = 15 * time.Second
	MaxTotal      = 15 * time.Second
	MinFrameRate  = 23.976
	MaxFrameRate  = 60.0
)

// MaxBytes returns the largest file of kind k the media API takes.
func MaxBytes(k Kind) int64 {
	switch k {
	case KindImage:
		return MaxImageBytes
	case KindVideo:
		return MaxVideoBytes
	case KindAudio:
		return MaxAudioBytes
	}
	return 0
}

// LimitError is a measured value outside a limit of the media API. Its
// message names what was measured and what is wanted, e.g. "image is
// 200x180 px, want width and height in [256, 5760]".
type LimitError struct {
	// Limit names the limit: "format", "size", "dimensions", "aspect",
	// "duration", "total", "frame_rate", "video_codec", "audio_codec".
	Limit string
	// Message is the one-line description.
	Message string
}

func (e *LimitError) Error() string { return e.Message }

func limitf(limit, format string, args ...any) *LimitError {
	return &LimitError{Limit: limit, Message: fmt.Sprintf(format, args...)}
}

// kindFormats names the accepted formats of each kind, for messages.
var kindFormats = map[Kind]string{
	KindImage: "JPEG, PNG, WEBP or HEIC/HEIF",
	KindVideo: "MP4 or MOV",
	KindAudio: "WAV or MP3",
}

// CheckSize checks a file's size against its kind's limit before anything
// else is read; it is the check a HEAD answer allows.
func CheckSize(want Kind, size int64) *LimitError {
	if max := MaxBytes(want); size > max {
		return limitf("size", "%s file is %d bytes, want at most %d (%d MB)", want, size, max, max/MB)
	}
	return nil
}

// Check compares info with the limits of kind want and returns the first
// one broken, or nil.
func Check(want Kind, info Info) *LimitError {
	if info.Kind() != want {
		return limitf("format", "content is %s, want %s (%s)", describe(info.Format), want, kindFormats[want])
	}
	if err := CheckSize(want, info.Size); err != nil {
		return err
	}
	if want == KindImage || want == KindVideo {
		w, h := info.Width, info.Height
		if w < MinSide || w > MaxSide || h < MinSide || h > MaxSide {
			return limitf("dimensions", "%s is %dx%d px, want width and height in [%d, %d]", want, w, h, MinSide, MaxSide)
		}
		// Compare w/h with the bounds without rounding: w*5 >= h*2 is
		// w/h >= 0.4 and w*2 <= h*5 is w/h <= 2.5.
		if w*5 < h*2 || w*2 > h*5 {
			return limitf("aspect", "%s aspect ratio is %s (%dx%d px), want [%g, %g]", want, ratio(w, h), w, h, MinAspect, MaxAspect)
		}
	}
	if want == KindVideo || want == KindAudio {
		d := info.Duration.Round(time.Millisecond)
		if d < MinClip || d > MaxClip {
			return limitf("duration", "%s is %s s long, want each clip in [%g, %g] s", want, seconds(d), MinClip.Seconds(), MaxClip.Seconds())
		}
	}
	if want == KindVideo {
		fps := math.Round(info.FrameRate*1000) / 1000
		if fps < MinFrameRate || fps > MaxFrameRate {
			return limitf("frame_rate", "video frame rate is %.3f fps, want [%g, %g]", info.FrameRate, MinFrameRate, MaxFrameRate)
		}
		if info.VideoCodec != "H.264" && info.VideoCodec != "H.265" {
			return limitf("video_codec", "video codec is %s, want H.264 or H.265", info.VideoCodec)
		}
		for _, c := range info.AudioCodecs {
			if c != "AAC" && c != "MP3" {
				return limitf("audio_codec", "video's audio codec is %s, want AAC or MP3", c)
			}
		}
	}
	return nil
}

// CheckTotal checks the summed duration of the clips of one kind.
func CheckTotal(kind Kind, total time.Duration, clips int) *LimitError {
	if d := total.Round(time.Millisecond); d > MaxTotal {
		return limitf("total", "the %d %s clips total %s s, want at most %g s", clips, kind, seconds(d), MaxTotal.Seconds())
	}
	return nil
}

func describe(f Format) string {
	switch {
	case f == FormatUnknown:
		return "of no known media format"
	case f.Kind() != "":
		return fmt.Sprintf("%s %s", f, f.Kind())
	}
	return string(f)
}

// ratio prints w/h with enough digits to show why it is out of range.
func ratio(w, h int) string {
	r := float64(w) / float64(h)
	s := fmt.Sprintf("%.2f", r)
	if s == "0.40" || s == "2.50" {
		s = fmt.Sprintf("%.4f", r)
	}
	return s
}

// seconds prints d in seconds with up to three decimals.
func seconds(d time.Duration) string {
	s := fmt.Sprintf("%.3f", d.Seconds())
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// Inspect checks a file of kind want (size bytes, read through r) against
// every limit of its kind: its size before anything is read, then what
// Probe finds. A broken limit, a format of another kind and a file of the
// right format that cannot be parsed are a *LimitError (the last with
// Limit "format": an input sluice cannot read is not let through unseen);
// a failure of r is returned as it is (IsReadError reports it).
func Inspect(r io.ReaderAt, size int64, want Kind) (Info, error) {
	if le := CheckSize(want, size); le != nil {
		return Info{Size: size}, le
	}
	info, err := Probe(r, size)
	switch {
	case IsReadError(err):
		return info, err
	case err != nil && info.Kind() == want:
		return info, limitf("format", "cannot be read as %s: %v", info.Format, err)
	}
	if le := Check(want, info); le != nil {
		return info, le
	}
	return info, nil
}

// Totals adds up the clip durations of a request's videos and audio clips.
// The zero value is ready.
type Totals struct {
	sum   map[Kind]time.Duration
	clips map[Kind]int
}

// Add counts one input of kind k that passed Inspect.
func (t *Totals) Add(k Kind, info Info) {
	if k == KindImage {
		return
	}
	if t.sum == nil {
		t.sum, t.clips = map[Kind]time.Duration{}, map[Kind]int{}
	}
	t.sum[k] += info.Duration
	t.clips[k]++
}

// Check returns the first kind whose clips total more than 15 s, or nil.
func (t *Totals) Check() *LimitError {
	for _, k := range []Kind{KindVideo, KindAudio} {
		if le := CheckTotal(k, t.sum[k], t.clips[k]); le != nil {
			return le
		}
	}
	return nil
}
