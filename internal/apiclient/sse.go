package apiclient

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxSSELine bounds one line, and one event's data, of a Server-Sent Events
// stream, so a hostile stream cannot exhaust memory.
const MaxSSELine = 16 << 20

// FrameError is a failed frame of a speech stream: upstream gave up on the
// synthesis and said why. It is permanent (IsPermanent).
type FrameError struct {
	// Code is the frame's output.error_code.
	Code string
	// Message is the frame's output.error_message, scrubbed.
	Message string
	// RequestID is the stream's request_id.
	RequestID string
}

// Error returns a one-line description with the code and message.
func (e *FrameError) Error() string {
	s := "apiclient: speech stream failed"
	if e.Code != "" {
		s += " (code " + e.Code + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.RequestID != "" {
		s += " [request_id " + e.RequestID + "]"
	}
	return s
}

// errLineTooLong is the cause of a line or event over MaxSSELine.
var errLineTooLong = fmt.Errorf("line or event longer than %d bytes", MaxSSELine)

// sseReader splits a Server-Sent Events stream into the data of its events
// (WHATWG HTML, "event stream interpretation"): lines end in CR, LF or
// CRLF; "data" fields are joined with LF; a blank line dispatches; comments
// and other fields are ignored.
type sseReader struct {
	sc    *bufio.Scanner
	data  []byte
	has   bool // a data field was seen since the last dispatch
	first bool // no line read yet (a leading BOM is dropped)
	max   int
}

func newSSEReader(r io.Reader, max int) *sseReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), max+2)
	sc.Split(scanSSELines)
	return &sseReader{sc: sc, first: true, max: max}
}

// next returns the data of the next event. At the end of the stream it
// dispatches a pending event that lacked its blank line, then returns
// io.EOF. A line or event over the limit returns errLineTooLong; a read
// error is returned as is.
func (s *sseReader) next() ([]byte, error) {
	for s.sc.Scan() {
		line := s.sc.Bytes()
		if s.first {
			line = bytes.TrimPrefix(line, []byte("\uFEFF"))
			s.first = false
		}
		if len(line) == 0 {
			if s.has {
				return s.dispatch(), nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := bytes.Cut(line, []byte(":"))
		if found {
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		if string(field) != "data" {
			continue
		}
		if s.has {
			s.data = append(s.data, '\n')
		}
		if len(s.data)+len(value) > s.max {
			return nil, errLineTooLong
		}
		s.data = append(s.data, value...)
		s.has = true
	}
	if err := s.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, errLineTooLong
		}
		return nil, err
	}
	if s.has {
		return s.dispatch(), nil
	}
	return nil, io.EOF
}

func (s *sseReader) dispatch() []byte {
	d := s.data
	s.data, s.has = nil, false
	return d
}

// scanSSELines is a bufio.SplitFunc for CR, LF and CRLF line ends.
func scanSSELines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil // a CR at the end: wait to see if LF follows
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// decodeDataURI decodes a base64 data URI ("data:audio/mpeg;base64,...")
// and returns its media type and bytes. Errors never quote the URI.
func decodeDataURI(s string) (mediaType string, data []byte, err error) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", nil, errors.New("not a data URI")
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, errors.New("data URI has no comma")
	}
	params := strings.Split(meta, ";")
	if len(params) < 2 || !strings.EqualFold(strings.TrimSpace(params[len(params)-1]), "base64") {
		return "", nil, errors.New("data URI is not base64")
	}
	mediaType = strings.TrimSpace(params[0])
	payload = strings.TrimRight(payload, " \t")
	enc := base64.StdEncoding
	if !strings.HasSuffix(payload, "=") && len(payload)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	data, err = enc.DecodeString(payload)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return "", nil, fmt.Errorf("data URI has invalid base64 at byte %d", int64(ce))
		}
		return "", nil, errors.New("data URI has invalid base64")
	}
	return mediaType, data, nil
}
