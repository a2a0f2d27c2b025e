// Package s3dev is the embedded S3-compatible store of the development
// mode (SLUICE_DEV=true): an in-process S3 server on a loopback address
// whose objects are plain files a user can open, at
// <Dir>/buckets/<bucket>/<key> (object metadata is kept as JSON under
// <Dir>/metadata). A file dropped into a bucket's directory by hand is an
// object like any other: it is listed and served, with a Content-Type
// taken from its extension and no user metadata.
//
// It speaks the real S3 wire protocol, so the worker, the AWS SDKs and the
// AWS CLI use it as they would S3; user-metadata headers go out lower-case
// (x-amz-meta-sha256) as S3 sends them. It is meant for development-sized
// artifacts: it does not verify request signatures (any key pair works;
// AccessKeyID and SecretAccessKey are the documented ones), it keeps the
// parts of a multipart upload in memory until the upload completes (and
// then holds the whole object in memory once while writing it), an object
// being written is visible on disk before it is complete, and overwriting
// an object merges the old object's user metadata into the new one's
// instead of replacing it.
package s3dev

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"mime"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
)

// Static credentials of the store. It does not check them, but S3 clients
// need a key pair to sign with; the development mode configures these, and
// they are the compose stack's defaults too.
const (
	AccessKeyID     = "sluice"
	SecretAccessKey = "sluice-dev-secret"
	// Region is the region clients should sign for.
	Region = "us-east-1"
	// DefaultAddr is the development mode's listen address
	// (SLUICE_DEV_S3_ADDR), the port the compose stack publishes its store
	// on, clear of NATS (4222) and the worker's HTTP (9090).
	DefaultAddr = "127.0.0.1:7070"
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
	// Front, when set, wraps the store's handler: the bench stamps each
	// request's arrival and end with it.
	Front func(http.Handler) http.Handler
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
	be := &backend{MultiBucketBackend: inner, dir: cfg.Dir}
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
	handler := lowerMetaKeys(gofakes3.New(be).Server())
	if cfg.Front != nil {
		handler = cfg.Front(handler)
	}
	s := &Server{
		srv: &http.Server{
			Handler:           handler,
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
// (signatures, checksums of another body); it adopts files written into a
// bucket's directory by hand (see adopt); and it refuses a copy onto the
// source itself, which the file-system backend would truncate.
type backend struct {
	*s3afero.MultiBucketBackend
	dir string
	// mu orders adoption against writes: writes share it, adopting a file
	// takes it alone, so an adoption never overwrites the metadata of an
	// object written meanwhile.
	mu sync.RWMutex
}

// HeadObject answers for an object, adopting a file placed by hand.
func (b *backend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	if err := b.adopt(bucket, key); err != nil {
		return nil, err
	}
	return b.MultiBucketBackend.HeadObject(bucket, key)
}

// GetObject serves an object, adopting a file placed by hand.
func (b *backend) GetObject(bucket, key string, rng *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	if err := b.adopt(bucket, key); err != nil {
		return nil, err
	}
	return b.MultiBucketBackend.GetObject(bucket, key, rng)
}

// ListBucket lists a bucket; when a file placed by hand makes the listing
// fail, every such file of the bucket is adopted and the listing retried.
func (b *backend) ListBucket(bucket string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	list, err := b.MultiBucketBackend.ListBucket(bucket, prefix, page)
	if err == nil || isS3Error(err) {
		return list, err
	}
	root := filepath.Join(b.dir, "buckets", bucket)
	werr := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return b.adopt(bucket, filepath.ToSlash(rel))
	})
	if werr != nil {
		return nil, errors.Join(err, werr)
	}
	return b.MultiBucketBackend.ListBucket(bucket, prefix, page)
}

// PutObject stores an object with its filtered metadata. The body is
// received whole into a file of its own first: the file-system backend
// truncates the object before it reads the body, so a request cut off
// half-way (a client gone, the store closed under it) would otherwise
// leave a short object behind the previous object's metadata, as a real
// S3 store never does.
func (b *backend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	// The file-system backend reads the object being replaced first.
	if err := b.adopt(bucket, key); err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	body, err := b.receive(input, size)
	if err != nil {
		return gofakes3.PutObjectResult{}, err
	}
	defer func() { _ = body.Close(); _ = os.Remove(body.Name()) }()
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.MultiBucketBackend.PutObject(bucket, key, keptMetadata(meta), body, size, cond)
}

// receive copies a request body into a temporary file outside every
// bucket and returns it rewound; a body shorter than size (when size is
// known) is an incomplete request.
func (b *backend) receive(input io.Reader, size int64) (*os.File, error) {
	dir := filepath.Join(b.dir, "incoming")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "put-*")
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(f, input)
	if err == nil && size >= 0 && n != size {
		err = gofakes3.ErrorMessagef(gofakes3.ErrIncompleteBody, "received %d of %d bytes", n, size)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// DeleteObject removes an object.
func (b *backend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.MultiBucketBackend.DeleteObject(bucket, key)
}

// DeleteMulti removes objects.
func (b *backend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.MultiBucketBackend.DeleteMulti(bucket, keys...)
}

// CopyObject copies an object to another key with the given metadata.
func (b *backend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	if srcBucket == dstBucket && srcKey == dstKey {
		return gofakes3.CopyObjectResult{}, gofakes3.ErrorMessage(gofakes3.ErrNotImplemented,
			"the development store cannot copy an object onto itself")
	}
	return gofakes3.CopyObject(b, srcBucket, srcKey, dstBucket, dstKey, meta)
}

// isS3Error reports whether err is an S3 error answer (no such bucket,
// bad request...) rather than a failure to read the files.
func isS3Error(err error) bool {
	var e gofakes3.Error
	return errors.As(err, &e)
}

// adopt makes the file of bucket/key an object when it was written by hand:
// the file-system backend serves only files whose metadata record it wrote
// (and fails on the others), so a file without a record, or whose size or
// modification time no longer match it, gets a fresh one: its MD5 (the
// ETag), size and time, and a Content-Type from its extension. Its user
// metadata is dropped, since it described other bytes. A missing file or
// bucket is left to the backend to report.
func (b *backend) adopt(bucket, key string) error {
	if gofakes3.ValidateBucketName(bucket) != nil || !fs.ValidPath(key) {
		return nil
	}
	obj := filepath.Join(b.dir, "buckets", bucket, filepath.FromSlash(key))
	metaFile := b.metaFile(bucket, key)
	if fresh, err := isFresh(obj, metaFile); fresh || err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// A write that held the lock meanwhile may have recorded the object.
	if fresh, err := isFresh(obj, metaFile); fresh || err != nil {
		return err
	}
	f, err := os.Open(obj)
	if err != nil {
		return err
	}
	defer f.Close()
	h := md5.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("s3dev: read %s/%s: %w", bucket, key, err)
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	ctype := mime.TypeByExtension(path.Ext(key))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	rec, err := json.Marshal(s3afero.Metadata{
		File: path.Join(bucket, key), ModTime: st.ModTime(), Size: st.Size(), Hash: h.Sum(nil),
		Meta: map[string]string{"Content-Type": ctype, "Last-Modified": st.ModTime().UTC().Format(http.TimeFormat)},
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(metaFile), 0o700); err != nil {
		return err
	}
	return os.WriteFile(metaFile, rec, 0o600)
}

// isFresh reports whether the object file obj has a metadata record at
// metaFile that matches its size and modification time; a missing object
// is "fresh" (there is nothing to adopt).
func isFresh(obj, metaFile string) (bool, error) {
	st, err := os.Stat(obj)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || (err == nil && !st.Mode().IsRegular()) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	raw, err := os.ReadFile(metaFile)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var m s3afero.Metadata
	if json.Unmarshal(raw, &m) != nil || len(m.Hash) == 0 {
		return false, nil
	}
	return m.Size == st.Size() && m.ModTime.Equal(st.ModTime()), nil
}

// metaFile is where the file-system backend keeps bucket/key's metadata
// record: <Dir>/metadata/<bucket>/<key with / and \ as _>-<FNV-128a of
// key in hex>. TestMetaFileIsTheBackends checks it against the backend.
func (b *backend) metaFile(bucket, key string) string {
	h := fnv.New128a()
	h.Write([]byte(key))
	name := strings.NewReplacer("/", "_", "\\", "_").Replace(key) + "-" + hex.EncodeToString(h.Sum(nil))
	return filepath.Join(b.dir, "metadata", bucket, name)
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

// lowerMetaKeys sends user-metadata headers as S3 does, lower-case
// (x-amz-meta-sha256): the store keeps them in Go's canonical form
// (X-Amz-Meta-Sha256), which clients that keep the case they receive
// (boto3, the AWS CLI) would show as "Sha256".
func lowerMetaKeys(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mw := &metaKeyWriter{ResponseWriter: w}
		next.ServeHTTP(mw, r)
		if !mw.wrote { // HEAD: net/http writes the header after the handler
			lowerMetaHeader(w.Header())
		}
	})
}

func lowerMetaHeader(h http.Header) {
	for k, v := range h {
		if lk := strings.ToLower(k); lk != k && strings.HasPrefix(lk, "x-amz-meta-") {
			delete(h, k)
			h[lk] = v // set directly: Header.Set would canonicalize it again
		}
	}
}

type metaKeyWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *metaKeyWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		lowerMetaHeader(w.Header())
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *metaKeyWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *metaKeyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
