package mediaprobe

import (
	"errors"
	"fmt"
	"io"
	"time"
)

// Sentinel errors of Probe; match them with errors.Is.
var (
	// ErrUnsupportedFormat means the bytes are of no format the media API
	// accepts (or of none sluice recognises). The error's message names the
	// format when it is known (GIF, AVIF, Matroska/WebM, ...).
	ErrUnsupportedFormat = errors.New("unsupported format")
	// ErrMalformed means the bytes start like an accepted format but
	// cannot be parsed: truncated, corrupt, or a variant sluice cannot read
	// (a fragmented MP4 without samples in its moov, a compressed moov).
	ErrMalformed = errors.New("malformed media")
)

// Info is what Probe found in a file.
type Info struct {
	// Format is the file's format by its magic bytes.
	Format Format
	// Size is the file's length in bytes.
	Size int64
	// Width and Height are the picture's size in pixels (images and
	// videos).
	Width, Height int
	// Duration is the clip's length (videos and audio).
	Duration time.Duration
	// FrameRate is the video track's average frames per second.
	FrameRate float64
	// VideoCodec names the video track's codec: "H.264", "H.265", or the
	// sample entry's four-character code.
	VideoCodec string
	// AudioCodecs names the codec of each audio track: "AAC", "MP3", or
	// a description of another.
	AudioCodecs []string
}

// Kind is the kind of media the file is, or "" when its format is not
// accepted.
func (i Info) Kind() Kind { return i.Format.Kind() }

// Probe reads r, a file of size bytes, and returns what it is. It reads
// only what the format needs. It fails with ErrUnsupportedFormat for a
// format the media API does not take, ErrMalformed for one it cannot
// parse, or the error of r (a read failure, wrapped) — never both: a
// read error is returned as it is, so the caller can tell an unreachable
// file from a bad one.
func Probe(r io.ReaderAt, size int64) (Info, error) {
	info := Info{Size: size}
	t := &tracked{r: r}
	r = t
	if size <= 0 {
		return info, fmt.Errorf("%w: the file is empty", ErrUnsupportedFormat)
	}
	head := make([]byte, min(size, sniffLen))
	if err := readFull(r, head, 0); err != nil {
		return info, err
	}
	info.Format = Sniff(head)
	var err error
	switch info.Format {
	case FormatJPEG, FormatPNG, FormatWEBP:
		err = probeStdImage(r, &info)
	case FormatHEIF:
		err = probeHEIF(r, &info)
	case FormatMP4, FormatMOV:
		err = probeMovie(r, &info)
	case FormatWAV:
		err = probeWAV(r, &info)
	case FormatMP3:
		err = probeMP3(r, &info)
	case FormatUnknown:
		err = fmt.Errorf("%w: the content is of no known media format", ErrUnsupportedFormat)
	default:
		err = fmt.Errorf("%w: the content is %s", ErrUnsupportedFormat, info.Format)
	}
	if err != nil && t.err != nil {
		// The parser saw a short read because the reader failed.
		err = &readError{err: t.err}
	}
	return info, err
}

// tracked remembers the first failure of a reader other than its end.
type tracked struct {
	r   io.ReaderAt
	err error
}

func (t *tracked) ReadAt(p []byte, off int64) (int, error) {
	n, err := t.r.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) && t.err == nil {
		t.err = err
	}
	return n, err
}

// readError marks a failure of the caller's reader, which Probe passes
// on instead of calling the file malformed.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// readFull reads len(p) bytes at off. Reading past the end is
// ErrMalformed (the file is truncated); any other failure of r is
// returned wrapped so that it stays recognisable.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return malformed("truncated: wanted %d bytes at offset %d, the file ends first", len(p), off)
	}
	return &readError{err: err}
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// IsReadError reports whether err came from the reader given to Probe
// rather than from the bytes it read.
func IsReadError(err error) bool {
	var re *readError
	return errors.As(err, &re)
}
