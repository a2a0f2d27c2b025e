package apiclient

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// formField is one non-file field of a multipart upload.
type formField struct{ name, value string }

// uploadSpec is the multipart body of one upload request; each attempt
// re-opens the source.
type uploadSpec struct {
	fields []formField // written before the file, in this order
	name   string      // file name of the "file" part
	// repeatable says a repeat after an ambiguous failure is harmless: an
	// upload that overwrites, or one chunk of a chunked upload.
	repeatable bool
	open       func() (io.ReadCloser, error)
}

// uploadRun is one attempt's body: a pipe fed by a goroutine that streams
// the form, so the file is never held in memory.
type uploadRun struct {
	body        *io.PipeReader
	contentType string
	done        chan error
}

// start opens the source and starts streaming the form into a pipe. arm is
// called once the last byte has been handed to the transport; until then
// guard ends the attempt when the transport takes no byte for its time.
func (u *uploadSpec) start(arm func(), guard stallGuard) (*uploadRun, error) {
	src, err := u.open()
	if err != nil {
		return nil, fmt.Errorf("open upload source: %w", err)
	}
	if src == nil {
		return nil, fmt.Errorf("open upload source: %w: open returned a nil reader", ErrInvalidArgument)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(guardedWriter{w: pw, guard: guard})
	run := &uploadRun{body: pr, contentType: mw.FormDataContentType(), done: make(chan error, 1)}
	go func() {
		rec := &sourceReader{r: src}
		err := u.writeForm(mw, rec)
		_ = src.Close()
		switch {
		case rec.err != nil:
			_ = pw.CloseWithError(rec.err)
			run.done <- fmt.Errorf("read upload source: %w", rec.err)
		case err != nil:
			// The transport stopped reading (the attempt is over); not
			// the source's fault.
			_ = pw.CloseWithError(err)
			run.done <- nil
		default:
			_ = pw.Close()
			arm()
			run.done <- nil
		}
	}()
	return run, nil
}

// guardedWriter runs each write into the pipe (which returns once the
// transport took the bytes) under a stallGuard.
type guardedWriter struct {
	w     io.Writer
	guard stallGuard
}

func (g guardedWriter) Write(p []byte) (int, error) {
	return g.guard.during(func() (int, error) { return g.w.Write(p) })
}

// writeForm writes the fields before the file, so a streaming server
// knows the target before the bytes arrive.
func (u *uploadSpec) writeForm(mw *multipart.Writer, src io.Reader) error {
	for _, f := range u.fields {
		if err := mw.WriteField(f.name, f.value); err != nil {
			return err
		}
	}
	part, err := mw.CreateFormFile("file", u.name)
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, src); err != nil {
		return err
	}
	return mw.Close()
}

// finish ends the attempt's body (unblocking the writer if the transport
// stopped early), waits for the writer, and returns the source's read
// error, if any.
func (r *uploadRun) finish() error {
	_ = r.body.Close()
	return <-r.done
}

// sourceReader records the first read error of the upload source, so it
// can be told apart from the transport closing the pipe.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && s.err == nil {
		s.err = err
	}
	return n, err
}

// coverValue spells the overwrite flag as the platform reads it: "cover"
// overwrites, "uncover" keeps an existing file (platform-evidence.md
// section 3; compute-api.md only says "overwrite indicator").
func coverValue(cover bool) string {
	if cover {
		return "cover"
	}
	return "uncover"
}

// Sizer is implemented by an upload source that knows its length up
// front (an S3 object, a download with Content-Length). Size returns -1
// when it does not.
type Sizer interface{ Size() int64 }

// Upload stores the bytes of open() as dir/fileName on the cluster. The
// body is streamed from the reader open returns, never buffered whole.
// cover true overwrites an existing file (field cover = "cover"), false
// keeps it ("uncover").
//
// Up to ComputeConfig.ChunkSize bytes (or whatever the size when it is 0)
// go in one request (POST .../file/upload, multipart path, cover, file).
// Larger sources go through the chunked upload (see uploadChunked). The
// size is the source's Size (see Sizer) when it reports one; otherwise
// the source is read once to count its bytes and opened again to send
// them.
//
// open is called once per attempt and its reader closed after each.
// Attempts are repeated after no connection (on the next enabled efile
// address), 429 and 503; after other 5xx answers and broken connections
// only when cover is true, because only then is a repeat harmless. A read
// error of the source is returned at once, never retried.
//
// dir must be an absolute path; fileName a plain name without a slash.
// Errors: ErrInvalidArgument naming the argument, *EnvelopeError (matching
// the named errors of the file codes, see fileError), network errors.
func (s *ClusterSession) Upload(ctx context.Context, dir, fileName string, cover bool, open func() (io.ReadCloser, error)) error {
	return fileError(s.upload(ctx, dir, fileName, cover, open), strings.TrimSuffix(dir, "/")+"/"+fileName)
}

func (s *ClusterSession) upload(ctx context.Context, dir, fileName string, cover bool, open func() (io.ReadCloser, error)) error {
	switch {
	case dir == "":
		return invalidArg("dir", "is required")
	case !strings.HasPrefix(dir, "/"):
		return invalidArg("dir", "must be an absolute path on the cluster")
	case strings.ContainsRune(dir, 0):
		return invalidArg("dir", "must not contain NUL")
	case fileName == "":
		return invalidArg("fileName", "is required")
	case strings.ContainsAny(fileName, "/\\\x00") || fileName == "." || fileName == "..":
		return invalidArg("fileName", "must be a plain file name without a path separator")
	case open == nil:
		return invalidArg("open", "is required")
	}
	chunk := s.c.cfg.ChunkSize
	if chunk <= 0 {
		return s.uploadWhole(ctx, dir, fileName, cover, open)
	}
	src, err := open()
	if err != nil {
		return fmt.Errorf("apiclient: compute upload: open upload source: %w", err)
	}
	if src == nil {
		return fmt.Errorf("apiclient: compute upload: open upload source: %w: open returned a nil reader", ErrInvalidArgument)
	}
	size := int64(-1)
	if sz, ok := src.(Sizer); ok {
		size = sz.Size()
	}
	if size < 0 {
		rec := &sourceReader{r: src}
		n, err := io.Copy(io.Discard, rec)
		_ = src.Close()
		if err != nil {
			return fmt.Errorf("apiclient: compute upload: read upload source: %w", err)
		}
		size, src = n, nil
	}
	first := &firstOpen{src: src, open: open}
	defer first.close()
	if size <= chunk {
		return s.uploadWhole(ctx, dir, fileName, cover, first.next)
	}
	return s.uploadChunked(ctx, dir, fileName, cover, size, first.next)
}

// firstOpen hands out an already open source on the first call and opens
// the source afresh on the later ones; close releases it if it was never
// handed out.
type firstOpen struct {
	src  io.ReadCloser
	open func() (io.ReadCloser, error)
}

func (f *firstOpen) next() (io.ReadCloser, error) {
	if src := f.src; src != nil {
		f.src = nil
		return src, nil
	}
	return f.open()
}

func (f *firstOpen) close() {
	if f.src != nil {
		_ = f.src.Close()
	}
}

// uploadWhole sends the file in one request.
func (s *ClusterSession) uploadWhole(ctx context.Context, dir, fileName string, cover bool, open func() (io.ReadCloser, error)) error {
	_, err := s.c.exchange(ctx, s, &request{
		op: "upload", method: http.MethodPost, svc: svcEfile, auth: true,
		path: "/efile/openapi/v2/file/upload",
		upload: &uploadSpec{
			fields:     []formField{{"path", dir}, {"cover", coverValue(cover)}},
			name:       fileName,
			repeatable: cover,
			open:       open,
		},
		class: classUpload,
	})
	return err
}

// mergeError marks a failed merge, which uploadChunked may answer by
// sending every chunk again.
type mergeError struct{ err error }

func (e *mergeError) Error() string { return e.err.Error() }
func (e *mergeError) Unwrap() error { return e.err }

// uploadChunked sends size bytes of the source in chunks of ChunkSize
// (POST .../file/burst, chunkNumber from 1) and then asks the platform to
// join them (POST .../file/merge). The source is read once, one chunk at
// a time into one buffer, so memory stays bounded by a chunk; each chunk
// is retried on its own from that buffer (a repeated chunk replaces
// itself). The merge is sent only after every chunk was acknowledged.
//
// A merge that fails after its own retries is retried whole: the source
// opened again and every chunk sent again under a new identifier, up to
// MaxAttempts rounds, when cover is true (with uncover a lost merge
// answer would make the repeat fail on the file it created). The target
// appears only when a merge succeeds; chunks of an abandoned identifier
// are the platform's to discard.
func (s *ClusterSession) uploadChunked(ctx context.Context, dir, fileName string, cover bool, size int64, open func() (io.ReadCloser, error)) error {
	buf := make([]byte, s.c.cfg.ChunkSize)
	for round := 1; ; round++ {
		err := s.chunkRound(ctx, dir, fileName, cover, size, buf, open)
		me, merge := errors.AsType[*mergeError](err)
		if err == nil || !merge {
			return err
		}
		if !cover || !IsTransient(me.err) || round >= s.c.cfg.MaxAttempts {
			return me.err
		}
		if err := s.c.cfg.Sleep(ctx, s.c.cfg.Backoff.Delay(round-1)); err != nil {
			return fmt.Errorf("apiclient: compute upload merge: %w", err)
		}
	}
}

// chunkRound sends every chunk under a new identifier, then the merge.
func (s *ClusterSession) chunkRound(ctx context.Context, dir, fileName string, cover bool, size int64, buf []byte, open func() (io.ReadCloser, error)) error {
	src, err := open()
	if err != nil {
		return fmt.Errorf("apiclient: compute upload: open upload source: %w", err)
	}
	if src == nil {
		return fmt.Errorf("apiclient: compute upload: open upload source: %w: open returned a nil reader", ErrInvalidArgument)
	}
	defer func() { _ = src.Close() }()
	rec := &sourceReader{r: src}
	chunk := int64(len(buf))
	total := (size + chunk - 1) / chunk
	id := newIdentifier()
	common := []formField{
		{"totalChunks", strconv.FormatInt(total, 10)},
		{"totalSize", strconv.FormatInt(size, 10)},
		{"chunkSize", strconv.FormatInt(chunk, 10)},
	}
	for n := int64(1); n <= total; n++ {
		want := min(chunk, size-(n-1)*chunk)
		part := buf[:want]
		if _, err := io.ReadFull(rec, part); err != nil {
			if rec.err == nil {
				err = fmt.Errorf("%w: the source ended before its announced %d bytes", io.ErrUnexpectedEOF, size)
			}
			return fmt.Errorf("apiclient: compute upload: read upload source: %w", err)
		}
		fields := append([]formField{{"chunkNumber", strconv.FormatInt(n, 10)}}, common...)
		fields = append(fields,
			formField{"currentChunkSize", strconv.FormatInt(want, 10)},
			formField{"identifier", id},
			formField{"filename", fileName},
			formField{"relativePath", fileName},
			formField{"path", dir},
			formField{"cover", coverValue(cover)},
		)
		_, err := s.c.exchange(ctx, s, &request{
			op: "upload chunk", method: http.MethodPost, svc: svcEfile, auth: true,
			path: "/efile/openapi/v2/file/burst",
			upload: &uploadSpec{
				fields: fields, name: fileName, repeatable: true,
				open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(part)), nil },
			},
			class: classUpload,
		})
		if err != nil {
			return err
		}
	}
	if n, _ := rec.Read(buf[:1]); n > 0 {
		return fmt.Errorf("apiclient: compute upload: read upload source: the source holds more than its announced %d bytes", size)
	}
	_, err = s.c.exchange(ctx, s, &request{
		op: "upload merge", method: http.MethodPost, svc: svcEfile, auth: true,
		path: "/efile/openapi/v2/file/merge",
		form: url.Values{
			"cover": {coverValue(cover)}, "filename": {fileName}, "identifier": {id},
			"path": {dir}, "relativePath": {fileName},
		},
		class: classMerge,
	})
	if err != nil {
		return &mergeError{err: err}
	}
	return nil
}

// newIdentifier names one round of a chunked upload.
func newIdentifier() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
