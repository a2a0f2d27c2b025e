package apiclient

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// DownloadBody is the open content of a downloaded file. Close it when
// done; closing early abandons the transfer.
type DownloadBody struct {
	r     io.Reader
	body  io.ReadCloser
	ctx   context.Context // the attempt's; guard cancels it on a stall
	guard stallGuard
	size  int64
}

// Read reads the file content. A read that waits AttemptTimeout without a
// byte fails with a transient timeout naming the stall.
func (d *DownloadBody) Read(p []byte) (int, error) {
	n, err := d.guard.during(func() (int, error) { return d.r.Read(p) })
	if err != nil && err != io.EOF {
		err = causeError(err, context.Cause(d.ctx), d.guard.d)
	}
	return n, err
}

// Close releases the connection.
func (d *DownloadBody) Close() error {
	err := d.body.Close()
	d.guard.cancel(nil)
	return err
}

// Size returns the Content-Length the platform announced, -1 when unknown.
func (d *DownloadBody) Size() int64 { return d.size }

// Download opens the file at path on the cluster (GET .../file/download,
// path URL-encoded in the query) and returns its content as a stream; the
// concrete type is *DownloadBody, whose Size reports the announced length.
// Opening is retried on network errors, 429 and 5xx (on the next enabled
// efile address when no connection can be made); a failure while reading
// the returned stream is the caller's to handle.
//
// The response form of a download is not documented: a 2xx answer with
// Content-Type application/json whose body is an envelope with a code other
// than "0" is taken as an error (an *EnvelopeError), anything else as the
// file's content. path must be absolute. Errors: ErrInvalidArgument,
// *EnvelopeError, network errors.
func (s *ClusterSession) Download(ctx context.Context, path string) (io.ReadCloser, error) {
	switch {
	case path == "":
		return nil, invalidArg("path", "is required")
	case !strings.HasPrefix(path, "/"):
		return nil, invalidArg("path", "must be an absolute path on the cluster")
	case strings.ContainsRune(path, 0):
		return nil, invalidArg("path", "must not contain NUL")
	}
	res, err := s.c.exchange(ctx, s, &request{
		op: "download", method: http.MethodGet, svc: svcEfile, auth: true,
		path:   "/efile/openapi/v2/file/download",
		query:  url.Values{"path": {path}},
		class:  classIdempotent,
		stream: true,
	})
	if err != nil {
		return nil, fileError(err, path)
	}
	return res.body, nil
}
