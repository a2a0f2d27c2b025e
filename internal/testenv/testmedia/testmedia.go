// Package testmedia gives tests real media: the fixtures of package
// mediaprobe, files of any size built from a real header and zeros that are
// never held in memory, and an HTTP server for both. It imports only the
// standard library, so the parser tests and their fuzzing stay light.
package testmedia

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fixture returns the bytes of a media fixture of package mediaprobe
// (internal/mediaprobe/testdata, made by its make-fixtures.sh).
func Fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(), name))
	if err != nil {
		t.Fatalf("media fixture %s: %v", name, err)
	}
	return b
}

// Dir is where the media fixtures are: internal/mediaprobe/testdata, or
// the directory MEDIAPROBE_FIXTURES names (CI regenerates them there with
// make-fixtures.sh and runs the tests on them again).
func Dir() string {
	if d := os.Getenv("MEDIAPROBE_FIXTURES"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "mediaprobe", "testdata")
}

// LargeMovie returns a size-byte MP4 made of the ftyp and moov boxes of
// the MP4 fixture fix with an mdat of zeros between them, as a camera
// writes it: the moov sits behind the media data. A prober that finds it
// by box headers reads a few kilobytes; one that reads the file reads it
// all. The zeros are not held in memory.
func LargeMovie(t testing.TB, fix []byte, size int64) *Sparse {
	t.Helper()
	var ftyp, moov []byte
	for off := 0; off+8 <= len(fix); {
		n := int(binary.BigEndian.Uint32(fix[off:]))
		if n < 8 || off+n > len(fix) {
			t.Fatalf("fixture box at %d has size %d", off, n)
		}
		switch string(fix[off+4 : off+8]) {
		case "ftyp":
			ftyp = fix[off : off+n]
		case "moov":
			moov = fix[off : off+n]
		}
		off += n
	}
	if ftyp == nil || moov == nil {
		t.Fatal("fixture has no ftyp or moov box")
	}
	mdat := make([]byte, 16)
	binary.BigEndian.PutUint32(mdat, 1)
	copy(mdat[4:], "mdat")
	binary.BigEndian.PutUint64(mdat[8:], uint64(size-int64(len(ftyp))-int64(len(moov))))
	return NewSparse(size).Put(0, ftyp).Put(int64(len(ftyp)), mdat).Put(size-int64(len(moov)), moov)
}

// Sparse is a file made of a few parts at their offsets and zeros
// elsewhere, which it does not hold: an io.ReaderAt, and an io.ReadSeeker
// through Reader.
type Sparse struct {
	size  int64
	parts []sparsePart
}

type sparsePart struct {
	off  int64
	data []byte
}

// NewSparse returns a size-byte Sparse of zeros.
func NewSparse(size int64) *Sparse { return &Sparse{size: size} }

// Put places data at off and returns s.
func (s *Sparse) Put(off int64, data []byte) *Sparse {
	s.parts = append(s.parts, sparsePart{off: off, data: data})
	return s
}

// Size returns the file's length.
func (s *Sparse) Size() int64 { return s.size }

// Reader returns a seekable reader of the whole file.
func (s *Sparse) Reader() *io.SectionReader { return io.NewSectionReader(s, 0, s.size) }

// ReadAt reads the file's bytes at off.
func (s *Sparse) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	n := len(p)
	if rest := s.size - off; int64(n) > rest {
		n = int(rest)
	}
	clear(p[:n])
	for _, pt := range s.parts {
		lo, hi := max(off, pt.off), min(off+int64(n), pt.off+int64(len(pt.data)))
		if lo < hi {
			copy(p[lo-off:hi-off], pt.data[lo-pt.off:hi-pt.off])
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Server serves the media fixtures over HTTP at /media/<name>, with
// Range support, plus objects added with Add; any other name is a 404.
type Server struct {
	// URL is the server's base URL.
	URL string

	mu    sync.Mutex
	extra map[string]func() io.ReadSeeker
	sent  atomic.Int64
	reqs  atomic.Int64
}

// Serve starts a Server on a loopback port until the test ends.
func Serve(t testing.TB) *Server {
	t.Helper()
	m := &Server{extra: map[string]func() io.ReadSeeker{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/media/")
		m.mu.Lock()
		open := m.extra[name]
		m.mu.Unlock()
		if open == nil && ok && !strings.Contains(name, "/") {
			if b, err := os.ReadFile(filepath.Join(Dir(), name)); err == nil {
				open = func() io.ReadSeeker { return bytes.NewReader(b) }
			}
		}
		if open == nil {
			http.NotFound(w, r)
			return
		}
		m.reqs.Add(1)
		http.ServeContent(&countingWriter{ResponseWriter: w, n: &m.sent}, r, "", time.Time{}, open())
	}))
	t.Cleanup(srv.Close)
	m.URL = srv.URL
	return m
}

// Add serves the object open returns at /media/name.
func (m *Server) Add(name string, open func() io.ReadSeeker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.extra[name] = open
}

// BytesSent returns the body bytes sent so far; Requests the requests
// answered with a body.
func (m *Server) BytesSent() int64 { return m.sent.Load() }

// Requests returns the requests for a known object so far.
func (m *Server) Requests() int64 { return m.reqs.Load() }

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}
