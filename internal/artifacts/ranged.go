package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/redact"
)

// rangeBlock is the unit a RangeReader fetches and keeps: a header read
// costs one block, and the reads after it usually fall in it.
const rangeBlock = 64 << 10

// rangeBlocks is how many blocks a RangeReader keeps.
const rangeBlocks = 8

// RangeReader reads a remote object by byte ranges: an io.ReaderAt over
// an HTTP(S) URL (Fetcher.OpenRange) or an S3 object (Store.OpenRange)
// that fetches only the ranges asked for, in blocks of 64 KiB it keeps a
// few of. Reads use the context given when it was opened. It is safe for
// concurrent use.
type RangeReader struct {
	ctx  context.Context
	size int64
	get  func(ctx context.Context, off, n int64) ([]byte, error)

	fetched  atomic.Int64
	requests atomic.Int64

	mu     sync.Mutex
	blocks map[int64][]byte
	order  []int64
}

func newRangeReader(ctx context.Context, size int64, get func(context.Context, int64, int64) ([]byte, error)) *RangeReader {
	return &RangeReader{ctx: ctx, size: size, get: get, blocks: make(map[int64][]byte)}
}

// Size returns the object's length in bytes.
func (r *RangeReader) Size() int64 { return r.size }

// BytesFetched returns how many bytes were transferred so far.
func (r *RangeReader) BytesFetched() int64 { return r.fetched.Load() }

// Requests returns how many range requests were sent so far.
func (r *RangeReader) Requests() int64 { return r.requests.Load() }

// ReadAt reads len(p) bytes at off, fetching what is not kept yet. It
// returns io.EOF past the end, and the fetch's error (a *FetchError, or
// the S3 error) when a range cannot be read.
func (r *RangeReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("%w: negative offset", ErrInvalidArgument)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := min(int64(len(p)), r.size-off)
	if want > rangeBlock {
		// A large read (an MP4's moov, say) is fetched as it is.
		b, err := r.fetch(off, want)
		n := copy(p, b)
		if err == nil && int64(n) < int64(len(p)) {
			err = io.EOF
		}
		return n, err
	}
	n := 0
	for int64(n) < want {
		at := off + int64(n)
		start := at - at%rangeBlock
		b, err := r.block(start)
		if err != nil {
			return n, err
		}
		if at-start >= int64(len(b)) {
			return n, io.ErrUnexpectedEOF
		}
		n += copy(p[n:want], b[at-start:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// block returns the block starting at start, fetching it when needed.
func (r *RangeReader) block(start int64) ([]byte, error) {
	r.mu.Lock()
	b, ok := r.blocks[start]
	r.mu.Unlock()
	if ok {
		return b, nil
	}
	b, err := r.fetch(start, min(rangeBlock, r.size-start))
	if err != nil {
		return nil, err
	}
	r.keep(start, b)
	return b, nil
}

func (r *RangeReader) keep(start int64, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.blocks[start]; ok {
		return
	}
	if len(r.order) == rangeBlocks {
		delete(r.blocks, r.order[0])
		r.order = r.order[1:]
	}
	r.blocks[start] = b
	r.order = append(r.order, start)
}

func (r *RangeReader) fetch(off, n int64) ([]byte, error) {
	r.requests.Add(1)
	b, err := r.get(r.ctx, off, n)
	r.fetched.Add(int64(len(b)))
	if err == nil && int64(len(b)) != n {
		err = io.ErrUnexpectedEOF
	}
	return b, err
}

// OpenRange opens rawURL for ranged reads. It learns the size with a GET
// of the first 64 KiB (Range: bytes=0-65535) rather than a HEAD, which a
// presigned URL signed for GET refuses; the block it gets is kept. A
// server that ignores Range is still read correctly: every later range is
// then read from a fresh download's start and the bytes before it are
// discarded, bounded by the object's size. The destination rules, redirect
// limits and timeouts of Open apply to every request, and every error is a
// scrubbed *FetchError (ErrTooLarge when the object is larger than
// MaxBytes).
func (f *Fetcher) OpenRange(ctx context.Context, rawURL string) (*RangeReader, error) {
	first, size, err := f.getRange(ctx, rawURL, 0, rangeBlock, -1)
	if err != nil {
		return nil, err
	}
	r := newRangeReader(ctx, size, func(ctx context.Context, off, n int64) ([]byte, error) {
		b, _, err := f.getRange(ctx, rawURL, off, n, size)
		return b, err
	})
	r.requests.Add(1)
	r.fetched.Add(int64(len(first)))
	if len(first) > 0 {
		r.keep(0, first)
	}
	return r, nil
}

// getRange GETs n bytes at off of rawURL. size is the object's size when
// known (-1 on the first request, which learns it from Content-Range or
// Content-Length).
func (f *Fetcher) getRange(ctx context.Context, rawURL string, off, n, size int64) (b []byte, total int64, err error) {
	scrubbed := redact.URL(rawURL)
	fail := func(status int, err error) error {
		return &FetchError{Status: status, URL: scrubbed, Err: scrubErr(err)}
	}
	u, err := url.Parse(rawURL)
	switch {
	case err != nil:
		return nil, 0, fail(0, fmt.Errorf("%w: url: not a valid URL", ErrInvalidArgument))
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, 0, fail(0, fmt.Errorf("%w: %q", ErrUnsupportedScheme, u.Scheme))
	case u.Host == "":
		return nil, 0, fail(0, fmt.Errorf("%w: url: no host", ErrInvalidArgument))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, 0, fail(0, fmt.Errorf("%w: url: %v", ErrInvalidArgument, scrubErr(err)))
	}
	req.Header.Set("Accept", "*/*")
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	resp, err := f.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, 0, fail(0, err)
	}
	defer backoff.DrainClose(resp.Body)
	switch {
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && off == 0:
		// An empty object has no first byte.
		if t, ok := rangeTotal(resp.Header.Get("Content-Range")); ok && t == 0 {
			return nil, 0, nil
		}
		return nil, 0, &FetchError{Status: resp.StatusCode, URL: scrubbed}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		fe := &FetchError{Status: resp.StatusCode, URL: scrubbed}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			fe.RetryAfter, _ = backoff.RetryAfter(resp.Header, f.cfg.Now())
		}
		return nil, 0, fe
	}
	body := io.Reader(resp.Body)
	total = size
	if resp.StatusCode == http.StatusPartialContent {
		t, ok := rangeTotal(resp.Header.Get("Content-Range"))
		if total < 0 {
			if !ok {
				return nil, 0, fail(resp.StatusCode, errors.New("the answer to a range request gives no object size (Content-Range)"))
			}
			total = t
		}
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != off {
			return nil, 0, fail(resp.StatusCode, fmt.Errorf("asked for bytes from %d, got a range starting elsewhere", off))
		}
	} else {
		// The whole object: skip to off.
		if total < 0 {
			if resp.ContentLength < 0 {
				return nil, 0, fail(resp.StatusCode, errors.New("the server gives no object size (no Content-Range, no Content-Length)"))
			}
			total = resp.ContentLength
		}
		if _, err := io.CopyN(io.Discard, body, off); err != nil {
			return nil, 0, fail(resp.StatusCode, fmt.Errorf("skip to byte %d: %w", off, err))
		}
	}
	if total > f.cfg.MaxBytes {
		return nil, 0, fail(resp.StatusCode, fmt.Errorf("%w: %d bytes exceed %d", ErrTooLarge, total, f.cfg.MaxBytes))
	}
	n = min(n, max(total-off, 0))
	b = make([]byte, n)
	m, err := io.ReadFull(body, b)
	if err != nil {
		return b[:m], total, fail(resp.StatusCode, fmt.Errorf("read bytes %d-%d: %w", off, off+n-1, err))
	}
	return b, total, nil
}

// rangeTotal parses the complete length of a Content-Range header
// ("bytes 0-99/1234" or "bytes */1234").
func rangeTotal(h string) (int64, bool) {
	_, t, ok := strings.Cut(h, "/")
	if !ok || t == "*" {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	return v, err == nil && v >= 0
}

// rangeStart parses the first byte of a Content-Range header.
func rangeStart(h string) (int64, bool) {
	s, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !ok {
		return 0, false
	}
	s, _, ok = strings.Cut(s, "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= 0
}

// OpenRange opens the S3 object bucket/key for ranged reads: a HEAD for
// its size, then a ranged GET per block. A missing object or bucket fails
// with ErrNotFound.
func (s *Store) OpenRange(ctx context.Context, bucket, key string) (*RangeReader, error) {
	head, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("artifacts: stat s3://%s/%s: %w", bucket, key, notFound(err))
	}
	size := aws.ToInt64(head.ContentLength)
	return newRangeReader(ctx, size, func(ctx context.Context, off, n int64) ([]byte, error) {
		out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
			Bucket: aws.String(bucket), Key: aws.String(key),
			Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)),
		})
		if err != nil {
			return nil, fmt.Errorf("artifacts: read s3://%s/%s: %w", bucket, key, notFound(err))
		}
		defer out.Body.Close()
		b := make([]byte, n)
		m, err := io.ReadFull(out.Body, b)
		if err != nil {
			return b[:m], fmt.Errorf("artifacts: read s3://%s/%s bytes %d-%d: %w", bucket, key, off, off+n-1, err)
		}
		return b, nil
	}), nil
}
