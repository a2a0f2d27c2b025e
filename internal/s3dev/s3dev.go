// Package s3dev is the embedded S3-compatible store of the development
// mode (SLUICE_DEV=true): an in-process S3 server on a loopback address
// whose objects are plain files a user can open, at
// <Dir>/buckets/<bucket>/<key> (object metadata is kept as JSON under
// <Dir>/metadata).
//
// It speaks the real S3 wire protocol, so the worker uses its ordinary S3
// client against it. It is meant for development-sized artifacts: it does
// not verify request signatures, it keeps the parts of a multipart upload
// in memory until the upload completes (and then holds the whole object in
// memory once while writing it), an object being written is visible on
// disk before it is complete, and overwriting an object merges the old
// object's user metadata into the new one's instead of replacing it.
package s3dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
)

// Static credentials of the store. It does not check them, but S3 clients
// need a key pair to sign with; the development mode configures these.
const (
	AccessKeyID     = "sluice"
	SecretAccessKey = "sluice-dev"
	// Region is the region clients should sign for.
	Region = "us-east-1"
)

// Config configures the store.
type Config struct {
	// Dir holds the store's files; it is created when missing. Required.
	Dir string
	// Addr is the loopback host:port to listen on; the store refuses a
	// non-loopback address because it does not authenticate requests.
	// Defaults to "127.0.0.1:0" (a free port).
	Addr string
	// Buckets are created at start when missing. Defaults to none.
	Buckets []string
}

// Server is a running store.
type Server struct {
	srv      *http.Server
	endpoint string
	dir      string
	closed   chan struct{}
	served   chan error

	mu    sync.Mutex
	conns map[net.Conn]http.ConnState // connections not yet closed

	closeOnce sync.Once
	closeErr  error
}

// Start opens the store in cfg.Dir, creates the configured buckets and
// serves S3 on cfg.Addr until Close is called or ctx ends.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Dir == "" {
		return nil, errors.New("s3dev: Dir: required")
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if err := checkLoopback(cfg.Addr); err != nil {
		return nil, err
	}
	for _, b := range cfg.Buckets {
		if err := gofakes3.ValidateBucketName(b); err != nil {
			return nil, fmt.Errorf("s3dev: Buckets: %q: %w", b, err)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("s3dev: Dir: %w", err)
	}
	fs, err := s3afero.FsPath(cfg.Dir, 0)
	if err != nil {
		return nil, fmt.Errorf("s3dev: Dir: %w", err)
	}
	inner, err := s3afero.MultiBucket(fs)
	if err != nil {
		return nil, fmt.Errorf("s3dev: open store: %w", err)
	}
	be := &backend{MultiBucketBackend: inner}
	for _, b := range cfg.Buckets {
		ok, err := inner.BucketExists(b)
		if err != nil {
			return nil, fmt.Errorf("s3dev: bucket %s: %w", b, err)
		}
		if !ok {
			if err := inner.CreateBucket(b); err != nil {
				return nil, fmt.Errorf("s3dev: create bucket %s: %w", b, err)
			}
		}
	}

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("s3dev: listen: %w", err)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           gofakes3.New(be).Server(),
			ReadHeaderTimeout: 30 * time.Second,
		},
		endpoint: "http://" + ln.Addr().String(),
		dir:      cfg.Dir,
		closed:   make(chan struct{}),
		served:   make(chan error, 1),
		conns:    map[net.Conn]http.ConnState{},
	}
	s.srv.ConnState = s.track
	go func() { s.served <- s.srv.Serve(ln) }()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.closed:
		}
	}()
	return s, nil
}

// checkLoopback refuses a listen address whose host is not a loopback IP
// or "localhost".
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("s3dev: Addr: %w", err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("s3dev: Addr: %q is not a loopback address (the store does not authenticate)", host)
	}
	return nil
}

// Endpoint is the store's base URL, e.g. http://127.0.0.1:41234; clients
// must use path-style addressing.
func (s *Server) Endpoint() string { return s.endpoint }

// Dir is the directory holding the store's files.
func (s *Server) Dir() string { return s.dir }

// ObjectPath is the file holding bucket/key.
func (s *Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.dir, "buckets", bucket, filepath.FromSlash(key))
}

// Close stops serving: it waits up to 5 s for requests being handled,
// then closes every connection. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		// Shutdown alone would also wait for connections a client opened
		// but never used; stop waiting as soon as no request is in flight.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		go func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for !s.idle() {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
			cancel()
		}()
		err := s.srv.Shutdown(ctx)
		if errors.Is(err, context.Canceled) {
			err = nil // nothing was in flight any more
		}
		err = errors.Join(err, s.srv.Close())
		if serr := <-s.served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
		s.closeErr = err
	})
	return s.closeErr
}

// track follows connection states (http.Server.ConnState).
func (s *Server) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st == http.StateClosed || st == http.StateHijacked {
		delete(s.conns, c)
		return
	}
	s.conns[c] = st
}

// idle reports whether no connection is handling a request.
func (s *Server) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.conns {
		if st == http.StateActive {
			return false
		}
	}
	return true
}

// backend adapts the file-system backend: it stores only the metadata S3
// itself keeps (Content-Type, Content-Disposition, Content-Encoding,
// Last-Modified and x-amz-meta-*), not every x-amz-* request header
// (signatures, checksums of another body), and refuses a copy onto the
// source itself, which the file-system backend would truncate.
type backend struct {
	*s3afero.MultiBucketBackend
}

// PutObject stores an object with its filtered metadata.
func (b *backend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	return b.MultiBucketBackend.PutObject(bucket, key, keptMetadata(meta), input, size, cond)
}

// CopyObject copies an object to another key with the given metadata.
func (b *backend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	if srcBucket == dstBucket && srcKey == dstKey {
		return gofakes3.CopyObjectResult{}, gofakes3.ErrorMessage(gofakes3.ErrNotImplemented,
			"the development store cannot copy an object onto itself")
	}
	return gofakes3.CopyObject(b, srcBucket, srcKey, dstBucket, dstKey, meta)
}

// keptMetadata returns the entries of meta that S3 stores with an object.
func keptMetadata(meta map[string]string) map[string]string {
	out := make(map[string]string, len(meta))
	for k, v := range meta {
		switch {
		case k == "Content-Type", k == "Content-Disposition", k == "Content-Encoding", k == "Last-Modified",
			strings.HasPrefix(k, "X-Amz-Meta-"):
			out[k] = v
		}
	}
	return out
}
