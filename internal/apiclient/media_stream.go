package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// Frame statuses of a speech stream (spec/media-api.md section 6).
const (
	frameProcessing = "processing"
	frameSucceeded  = "succeeded"
	frameFailed     = "failed"
)

// StreamSpeech opens a streamed speech synthesis (stream_format "sse",
// whatever req.StreamFormat says) and returns the decoded audio as a
// stream. Opening is a paid call with the retries and errors of
// SubmitVideo. The first frame is read before StreamSpeech returns, so a
// stream that fails at once returns its *FrameError here and ContentType is
// known. The caller must Close the stream.
func (c *Media) StreamSpeech(ctx context.Context, req SpeechRequest) (*SpeechStream, error) {
	const op = "stream speech"
	req.StreamFormat = "sse"
	body, err := mediaBody(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	resp, release, err := c.doStream(ctx, mediaCall{op: op, method: http.MethodPost, path: pathAudios, body: body, paid: true})
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "text/event-stream" {
			backoff.DrainClose(resp.Body)
			release()
			return nil, fmt.Errorf("%s: %w: %w: HTTP %d with Content-Type %q, not text/event-stream",
				op, ErrAmbiguous, ErrMalformedResponse, resp.StatusCode, scrub(mt))
		}
	}
	s := newSpeechStream(&stallBody{ReadCloser: resp.Body, timeout: c.cfg.StreamStallTimeout}, release, c.cfg.APIKey)
	s.fill()
	if len(s.buf) == 0 && s.err != nil {
		err := s.err
		_ = s.Close()
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return s, nil
}

// ErrStreamStalled marks a speech stream given up because it sent
// nothing for MediaConfig.StreamStallTimeout; the error matches
// ErrStreamIncomplete and ErrAmbiguous too.
var ErrStreamStalled = errors.New("apiclient: stream sent nothing for too long")

// stallBody closes a stream's body when one Read waits longer than
// timeout, so that a server that stops sending while it holds the
// connection is noticed: the Read then returns ErrStreamStalled. (A
// stream's reads cannot take a connection deadline: the caller's HTTP
// client owns the connection.)
type stallBody struct {
	io.ReadCloser
	timeout time.Duration
	stalled atomic.Bool
}

func (b *stallBody) Read(p []byte) (int, error) {
	t := time.AfterFunc(b.timeout, func() {
		b.stalled.Store(true)
		_ = b.ReadCloser.Close()
	})
	n, err := b.ReadCloser.Read(p)
	if !t.Stop() && b.stalled.Load() {
		return n, fmt.Errorf("%w: nothing for %s", ErrStreamStalled, b.timeout)
	}
	return n, err
}

// SpeechStream is the decoded audio of a streamed speech synthesis: the
// concatenated base64 increments of the processing frames. Read returns
// io.EOF only after the succeeded frame; a failed frame is a *FrameError; a
// stream that ends or breaks before its final frame is an error matching
// ErrStreamIncomplete and ErrAmbiguous. It is not safe for concurrent
// Reads; Close may be called from another goroutine.
type SpeechStream struct {
	body      io.ReadCloser
	release   func()
	sse       *sseReader
	secrets   []string
	buf       []byte // decoded audio not yet returned
	requestID string
	mediaType string
	usage     json.RawMessage
	done      bool  // the succeeded frame was seen
	err       error // sticky error other than io.EOF
	closeOnce sync.Once
}

// newSpeechStream decodes the SSE body; release runs once on Close.
func newSpeechStream(body io.ReadCloser, release func(), secrets ...string) *SpeechStream {
	return &SpeechStream{body: body, release: release, sse: newSSEReader(body, MaxSSELine), secrets: secrets}
}

// Read reads decoded audio bytes.
func (s *SpeechStream) Read(p []byte) (int, error) {
	for len(s.buf) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if s.done {
			return 0, io.EOF
		}
		s.fill()
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// Close releases the connection; it is safe to call more than once.
func (s *SpeechStream) Close() error {
	s.closeOnce.Do(func() {
		// Not drained: an unfinished stream could be long.
		_ = s.body.Close()
		s.release()
	})
	return nil
}

// RequestID returns the request_id of the stream's frames ("" before any
// frame carried one).
func (s *SpeechStream) RequestID() string { return s.requestID }

// ContentType returns the media type of the audio increments, e.g.
// "audio/mpeg" ("" when no increment carried one).
func (s *SpeechStream) ContentType() string { return s.mediaType }

// Usage returns the final frame's usage object verbatim; it is valid after
// Read returned io.EOF and nil before, or when the frame had none.
func (s *SpeechStream) Usage() json.RawMessage { return s.usage }

// sseFrame is one frame of a speech stream.
type sseFrame struct {
	RequestID looseString `json:"request_id"`
	Output    struct {
		TaskStatus   looseString `json:"task_status"`
		Results      []string    `json:"results"`
		ErrorCode    looseString `json:"error_code"`
		ErrorMessage looseString `json:"error_message"`
	} `json:"output"`
	Usage json.RawMessage `json:"usage"`
}

// fill reads events until some audio is buffered, the final frame was
// seen, or an error was recorded in s.err.
func (s *SpeechStream) fill() {
	for len(s.buf) == 0 && !s.done && s.err == nil {
		data, err := s.sse.next()
		switch {
		case errors.Is(err, io.EOF):
			s.err = fmt.Errorf("%w (%w)", ErrStreamIncomplete, ErrAmbiguous)
			return
		case errors.Is(err, errLineTooLong):
			s.err = fmt.Errorf("%w (%w): %w: %w", ErrStreamIncomplete, ErrAmbiguous, ErrMalformedResponse, err)
			return
		case err != nil:
			s.err = fmt.Errorf("%w (%w): %w", ErrStreamIncomplete, ErrAmbiguous, err)
			return
		}
		if err := s.event(data); err != nil {
			s.err = err
		}
	}
}

// event handles one event's data: one or more JSON frames.
func (s *SpeechStream) event(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	for i := 0; ; i++ {
		var f sseFrame
		err := dec.Decode(&f)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return s.malformed(mediaJSONError(err))
		}
		if err := s.frame(&f); err != nil || s.done {
			return err
		}
	}
}

// frame handles one decoded frame.
func (s *SpeechStream) frame(f *sseFrame) error {
	if s.requestID == "" {
		s.requestID = scrub(string(f.RequestID), s.secrets...)
	}
	switch status := string(f.Output.TaskStatus); status {
	case frameProcessing:
		return s.audio(f.Output.Results)
	case frameSucceeded:
		if err := s.audio(f.Output.Results); err != nil {
			return err
		}
		if u := bytes.TrimSpace(f.Usage); len(u) > 0 && !bytes.Equal(u, []byte("null")) {
			s.usage = append(json.RawMessage(nil), u...)
		}
		s.done = true
		return nil
	case frameFailed:
		return &FrameError{
			Code:      scrub(string(f.Output.ErrorCode), s.secrets...),
			Message:   scrub(string(f.Output.ErrorMessage), s.secrets...),
			RequestID: s.requestID,
		}
	default:
		if len(f.Output.Results) > 0 {
			return s.malformed(fmt.Errorf("frame with unknown status %q carries audio", scrub(status)))
		}
		return nil // a frame without audio and of unknown status says nothing
	}
}

// audio appends the decoded increments of one frame.
func (s *SpeechStream) audio(results []string) error {
	for i, r := range results {
		mt, b, err := decodeDataURI(r)
		if err != nil {
			return s.malformed(fmt.Errorf("output.results[%d]: %w", i, err))
		}
		if s.mediaType == "" {
			s.mediaType = scrub(mt)
		}
		if len(s.buf) == 0 {
			s.buf = b
		} else {
			s.buf = append(s.buf, b...)
		}
	}
	return nil
}

func (s *SpeechStream) malformed(cause error) error {
	return fmt.Errorf("%w (%w): %w: %w", ErrStreamIncomplete, ErrAmbiguous, ErrMalformedResponse, cause)
}
