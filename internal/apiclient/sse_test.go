package apiclient

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		want   []string
		err    error // after the events; nil means io.EOF
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"a", "b"}, nil},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}, nil},
		{"cr", "data: a\r\rdata: b\r\r", []string{"a", "b"}, nil},
		{"no space after colon", "data:a\n\n", []string{"a"}, nil},
		{"only one space is stripped", "data:  a\n\n", []string{" a"}, nil},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}, nil},
		{"comments and other fields", ": hi\nid: 1\nevent: result\nretry: 10\ndata: a\n\n", []string{"a"}, nil},
		{"field without colon", "data\n\n", []string{""}, nil},
		{"blank lines without data", "\n\n\nid: 3\n\ndata: a\n\n", []string{"a"}, nil},
		{"bom", "\uFEFFdata: a\n\n", []string{"a"}, nil},
		{"last event without blank line", "data: a\n\ndata: b", []string{"a", "b"}, nil},
		{"empty", "", nil, nil},
		{"line too long", "data: " + strings.Repeat("x", 100) + "\n\n", nil, errLineTooLong},
		{"event too long", strings.Repeat("data: xxxxxxxxxx\n", 10) + "\n", nil, errLineTooLong},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newSSEReader(strings.NewReader(tt.stream), 64)
			var got []string
			var err error
			for {
				var d []byte
				d, err = r.next()
				if err != nil {
					break
				}
				got = append(got, string(d))
			}
			want := tt.err
			if want == nil {
				want = io.EOF
			}
			if !errors.Is(err, want) {
				t.Fatalf("err %v, want %v", err, want)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
				t.Fatalf("events %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecodeDataURI(t *testing.T) {
	t.Parallel()
	raw := []byte("hello, audio\x00\xff")
	std := base64.StdEncoding.EncodeToString(raw)
	tests := []struct {
		name, uri string
		mt        string
		ok        bool
	}{
		{"standard", "data:audio/mpeg;base64," + std, "audio/mpeg", true},
		{"unpadded", "data:audio/wav;base64," + strings.TrimRight(std, "="), "audio/wav", true},
		{"params", "data:audio/mpeg;rate=24000;BASE64," + std, "audio/mpeg", true},
		{"no type", "data:;base64," + std, "", true},
		{"not data", "https://cdn.test/a.mp3", "", false},
		{"no comma", "data:audio/mpeg;base64", "", false},
		{"not base64", "data:audio/mpeg," + std, "", false},
		{"bad base64", "data:audio/mpeg;base64,@@@@", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mt, b, err := decodeDataURI(tt.uri)
			if (err == nil) != tt.ok {
				t.Fatalf("err %v", err)
			}
			if !tt.ok {
				if strings.Contains(err.Error(), std) {
					t.Error("error quotes the payload")
				}
				return
			}
			if mt != tt.mt || !bytes.Equal(b, raw) {
				t.Fatalf("got %q %q", mt, b)
			}
		})
	}
}

// frame builds one SSE event of a speech stream.
func frame(status, results, extra string) string {
	out := `"task_status":"` + status + `"`
	if results != "" {
		out += `,"results":[` + results + `]`
	}
	return `data: {"request_id":"r-1","output":{` + out + `}` + extra + "}\n\n"
}

func audioURI(b string) string {
	return `"data:audio/mpeg;base64,` + base64.StdEncoding.EncodeToString([]byte(b)) + `"`
}

func TestSpeechStreamFrames(t *testing.T) {
	t.Parallel()
	const usage = `,"usage":{"audio_count":1,"input_chars_num":5}`
	tests := []struct {
		name   string
		stream string
		audio  string
		usage  string
		check  func(error) bool
	}{
		{"increments and final", frame("processing", audioURI("ab"), "") + frame("processing", audioURI("cd")+","+audioURI("e"), "") + frame("succeeded", "", usage),
			"abcde", `{"audio_count":1,"input_chars_num":5}`, nil},
		{"final with null usage", frame("processing", audioURI("x"), "") + frame("succeeded", "", `,"usage":null`), "x", "", nil},
		{"frames after the final are ignored", frame("succeeded", "", usage) + "data: garbage\n\n", "", `{"audio_count":1,"input_chars_num":5}`, nil},
		{"two frames in one event", "data: " + strings.TrimSuffix(strings.TrimPrefix(frame("processing", audioURI("a"), ""), "data: "), "\n\n") +
			"\ndata: " + strings.TrimPrefix(frame("succeeded", "", ""), "data: "), "a", "", nil},
		{"unknown status without audio is skipped", frame("queued", "", "") + frame("succeeded", "", ""), "", "", nil},
		{"failed frame", frame("processing", audioURI("ab"), "") + `data: {"request_id":"r-1","output":{"task_status":"failed","error_code":"Throttling","error_message":"too many"}}` + "\n\n",
			"ab", "", func(err error) bool {
				fe, ok := errors.AsType[*FrameError](err)
				return ok && fe.Code == "Throttling" && fe.Message == "too many" && fe.RequestID == "r-1" && IsPermanent(err)
			}},
		{"numeric error code", `data: {"output":{"task_status":"failed","error_code":500}}` + "\n\n", "", "", func(err error) bool {
			fe, ok := errors.AsType[*FrameError](err)
			return ok && fe.Code == "500"
		}},
		{"ends without final", frame("processing", audioURI("ab"), ""), "ab", "", incomplete},
		{"empty stream", "", "", "", incomplete},
		{"cut mid-frame", frame("processing", audioURI("ab"), "") + `data: {"output":{"task_st`, "ab", "", func(err error) bool {
			return incomplete(err) && errors.Is(err, ErrMalformedResponse)
		}},
		{"unknown status with audio", frame("speaking", audioURI("ab"), ""), "", "", malformed},
		{"not a data uri", frame("processing", `"https://cdn.test/a.mp3"`, ""), "", "", malformed},
		{"results not strings", frame("processing", `1`, ""), "", "", malformed},
		{"not json", "data: hello\n\n", "", "", malformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSpeechStream(io.NopCloser(strings.NewReader(tt.stream)), func() {}, "key")
			audio, err := io.ReadAll(s)
			if string(audio) != tt.audio {
				t.Errorf("audio %q, want %q", audio, tt.audio)
			}
			if tt.check == nil {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				if string(s.Usage()) != tt.usage {
					t.Errorf("usage %s, want %s", s.Usage(), tt.usage)
				}
			} else if !tt.check(err) {
				t.Fatalf("err %v", err)
			}
			if _, err2 := s.Read(make([]byte, 1)); (err == nil) != errors.Is(err2, io.EOF) {
				t.Errorf("Read after the end: %v (first %v)", err2, err)
			}
			_ = s.Close()
			_ = s.Close()
		})
	}
}

func incomplete(err error) bool {
	return errors.Is(err, ErrStreamIncomplete) && errors.Is(err, ErrAmbiguous) && !IsTransient(err)
}

func malformed(err error) bool {
	return incomplete(err) && errors.Is(err, ErrMalformedResponse)
}

// repeatReader yields n bytes of c.
type repeatReader struct {
	c byte
	n int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = r.c
	}
	r.n -= k
	return k, nil
}

func TestSpeechStreamLineLimit(t *testing.T) {
	t.Parallel()
	body := io.MultiReader(strings.NewReader("data: "), &repeatReader{c: 'A', n: MaxSSELine + 10}, strings.NewReader("\n\n"))
	s := newSpeechStream(io.NopCloser(body), func() {})
	_, err := io.Copy(io.Discard, s)
	if !malformed(err) || !errors.Is(err, errLineTooLong) {
		t.Fatalf("err %v", err)
	}
}
