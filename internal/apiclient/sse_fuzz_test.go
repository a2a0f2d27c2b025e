package apiclient

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzSSEFrames feeds arbitrary bytes to the speech stream decoder: it must
// never panic, and must end in io.EOF only after a succeeded frame.
func FuzzSSEFrames(f *testing.F) {
	f.Add([]byte(frame("processing", audioURI("abc"), "") + frame("succeeded", "", `,"usage":{"audio_count":1}`)))
	f.Add([]byte(frame("processing", audioURI("abc"), "") + `data: {"output":{"task_status":"failed","error_code":"x"}}` + "\n\n"))
	f.Add([]byte("data: {\"output\":{\"task_status\":\"processing\",\"results\":[\"data:;base64,\"]}}\r\rdata:{}\r\n"))
	f.Add([]byte(": comment\nevent: x\ndata: [1,2]\ndata: null\n\n"))
	f.Add([]byte("\uFEFFdata: {\"output\":{\"task_status\":\"succeeded\"}}"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		s := newSpeechStream(io.NopCloser(strings.NewReader(string(stream))), func() {}, "secret-key")
		_, err := io.Copy(io.Discard, s)
		switch {
		case err == nil:
			if !s.done {
				t.Fatal("clean end without a succeeded frame")
			}
		case errors.Is(err, ErrStreamIncomplete):
			if !errors.Is(err, ErrAmbiguous) {
				t.Fatalf("incomplete but not ambiguous: %v", err)
			}
		default:
			if _, ok := errors.AsType[*FrameError](err); !ok {
				t.Fatalf("unexpected error kind: %v", err)
			}
		}
		if err != nil && strings.Contains(err.Error(), "secret-key") {
			t.Fatalf("error leaks the key: %v", err)
		}
		_ = s.Close()
	})
}
