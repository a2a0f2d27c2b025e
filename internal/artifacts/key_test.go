package artifacts

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 300)
	tests := []struct {
		name                          string
		outputPrefix, kind, job, file string
		want                          string
		wantField                     string // "" means success
	}{
		{"Plain", "", "video", "clip-0001", "result-0.mp4", "sluice/video/clip-0001/result-0.mp4", ""},
		{"OutputPrefix", "spring/clips", "video", "clip-0001", "result-0.mp4", "sluice/spring/clips/video/clip-0001/result-0.mp4", ""},
		{"UnicodeOutputPrefix", "frühling/clips", "speech", "s1", "audio.wav", "sluice/frühling/clips/speech/s1/audio.wav", ""},
		{"UpstreamPathIsReducedToBasename", "", "compute", "j1", "/home/user/../../etc/passwd", "sluice/compute/j1/passwd", ""},
		{"BackslashPath", "", "compute", "j1", `C:\out\run.log`, "sluice/compute/j1/run.log", ""},
		{"UnsafeCharsReplaced", "", "compute", "j1", "my file (1)?.txt", "sluice/compute/j1/my_file__1__.txt", ""},
		{"DotDotFileName", "", "video", "j1", "..", "sluice/video/j1/__", ""},
		{"DotFileName", "", "video", "j1", "a/.", "sluice/video/j1/_", ""},
		{"LongFileNameKeepsExtension", "", "video", "j1", long + ".mp4", "sluice/video/j1/" + strings.Repeat("a", MaxFileNameBytes-4) + ".mp4", ""},
		{"LeadingSlashPrefix", "/abs", "video", "j1", "f", "", "output.prefix"},
		{"DotDotSegment", "a/../b", "video", "j1", "f", "", "output.prefix"},
		{"DotDotOnly", "..", "video", "j1", "f", "", "output.prefix"},
		{"EmptySegment", "a//b", "video", "j1", "f", "", "output.prefix"},
		{"TrailingSlash", "a/", "video", "j1", "f", "", "output.prefix"},
		{"ControlChar", "a\nb", "video", "j1", "f", "", "output.prefix"},
		{"DEL", "a\x7fb", "video", "j1", "f", "", "output.prefix"},
		{"InvalidUTF8", "a\xffb", "video", "j1", "f", "", "output.prefix"},
		{"TooLongPrefix", strings.Repeat("p", MaxOutputPrefixBytes+1), "video", "j1", "f", "", "output.prefix"},
		{"KindWithSlash", "", "vid/eo", "j1", "f", "", "kind"},
		{"KindDotDot", "", "..", "j1", "f", "", "kind"},
		{"EmptyKind", "", "", "j1", "f", "", "kind"},
		{"JobIDWithSlash", "", "video", "a/b", "f", "", "job_id"},
		{"JobIDDotDot", "", "video", "..", "f", "", "job_id"},
		{"EmptyJobID", "", "video", "", "f", "", "job_id"},
		{"EmptyFile", "", "video", "j1", "", "", "file"},
		{"DirectoryOnlyFile", "", "video", "j1", "out/", "", "file"},
	}
	s := &Store{prefix: "sluice"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Key(tt.outputPrefix, tt.kind, tt.job, tt.file)
			if tt.wantField == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Key = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Key = %q, want an error naming %s", got, tt.wantField)
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tt.wantField+":") {
				t.Fatalf("Key error = %v, want ErrInvalidArgument naming %s", err, tt.wantField)
			}
		})
	}
}

func TestSanitizeFileName(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"result.mp4", "result.mp4"},
		{"https://cdn.example.test/out/abc.mp4", "abc.mp4"},
		{"a b\tc", "a_b_c"},
		{"日本.wav", "__.wav"},
		{".", "_"},
		{"..", "__"},
		{"../..", "__"},
		{"...", "..."},
		{"", ""},
		{"dir/", ""},
		{strings.Repeat("x", 500), strings.Repeat("x", MaxFileNameBytes)},
		{strings.Repeat("x", 200) + "." + strings.Repeat("e", 40), strings.Repeat("x", MaxFileNameBytes)},
	}
	for _, tt := range tests {
		if got := SanitizeFileName(tt.in); got != tt.want {
			t.Errorf("SanitizeFileName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzKey checks that no input makes Key panic or produce a key outside the
// prefix, with a ".." segment, an empty segment or a control character.
func FuzzKey(f *testing.F) {
	f.Add("spring/clips", "video", "clip-0001", "result-0.mp4")
	f.Add("", "compute", "j1", "../../etc/passwd")
	s := &Store{prefix: "sluice/base"}
	f.Fuzz(func(t *testing.T, outputPrefix, kind, jobID, file string) {
		key, err := s.Key(outputPrefix, kind, jobID, file)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
			}
			return
		}
		if !strings.HasPrefix(key, "sluice/base/") {
			t.Fatalf("key %q is outside the prefix", key)
		}
		if strings.Contains(key, "//") {
			t.Fatalf("key %q has an empty segment", key)
		}
		for seg := range strings.SplitSeq(key, "/") {
			if seg == ".." || seg == "" {
				t.Fatalf("key %q has segment %q", key, seg)
			}
		}
		if !utf8.ValidString(key) || hasControl(key) || len(key) > maxKeyBytes {
			t.Fatalf("key %q is not a valid S3 key", key)
		}
		if last := key[strings.LastIndexByte(key, '/')+1:]; !isSafeName(last) {
			t.Fatalf("file name %q of key %q is not safe", last, key)
		}
	})
}
