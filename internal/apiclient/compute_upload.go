package apiclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
)

// uploadSpec is the multipart body of one upload; each attempt re-opens
// the source.
type uploadSpec struct {
	dir, name string
	cover     bool
	open      func() (io.ReadCloser, error)
}

// uploadRun is one attempt's body: a pipe fed by a goroutine that streams
// the form, so the file is never held in memory.
type uploadRun struct {
	body        *io.PipeReader
	contentType string
	done        chan error
}

// start opens the source and starts streaming the form into a pipe. arm is
// called once the last byte has been handed to the transport.
func (u *uploadSpec) start(arm func()) (*uploadRun, error) {
	src, err := u.open()
	if err != nil {
		return nil, fmt.Errorf("open upload source: %w", err)
	}
	if src == nil {
		return nil, fmt.Errorf("open upload source: %w: open returned a nil reader", ErrInvalidArgument)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
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

// writeForm writes the fields path and cover before the file, so a
// streaming server knows the target before the bytes arrive.
func (u *uploadSpec) writeForm(mw *multipart.Writer, src io.Reader) error {
	if err := mw.WriteField("path", u.dir); err != nil {
		return err
	}
	cover := "false"
	if u.cover {
		cover = "true"
	}
	if err := mw.WriteField("cover", cover); err != nil {
		return err
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

// Upload stores the bytes of open() as dir/fileName on the cluster (POST
// .../file/upload, multipart fields path, cover and file). The body is
// streamed from the reader open returns, never buffered whole, and sent
// chunked (its length is not known in advance). cover "true" overwrites an
// existing file.
//
// open is called once per attempt and its reader closed after each.
// Attempts are repeated after no connection (on the next enabled efile
// address), 429 and 503; after other 5xx answers and broken connections
// only when cover is true, because only then is a repeat harmless. A read
// error of the source is returned at once, never retried.
//
// dir must be an absolute path; fileName a plain name without a slash.
// Errors: ErrInvalidArgument naming the argument, *EnvelopeError, network
// errors.
func (s *ClusterSession) Upload(ctx context.Context, dir, fileName string, cover bool, open func() (io.ReadCloser, error)) error {
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
	_, err := s.c.exchange(ctx, s, &request{
		op: "upload", method: http.MethodPost, svc: svcEfile, auth: true,
		path:   "/efile/openapi/v2/file/upload",
		upload: &uploadSpec{dir: dir, name: fileName, cover: cover, open: open},
		class:  classUpload,
	})
	return err
}
