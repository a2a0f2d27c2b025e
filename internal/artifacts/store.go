package artifacts

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/gopool"
	"github.com/sluice-dev/sluice/internal/redact"
	"github.com/sluice-dev/sluice/internal/state"
)

// Artifact describes one object copied to S3 (see state.Artifact).
type Artifact = state.Artifact

// OpenFunc opens the source of a copy. Copy calls it once per attempt, so
// it must start afresh each time. It returns the body (closed by Copy), the
// Content-Type the source gave ("" when none), and a description of the
// source for Artifact.Source (scrubbed again by Copy). An error that is
// worth retrying must say so (see IsTemporary and Transient).
type OpenFunc func(ctx context.Context) (body io.ReadCloser, contentType, source string, err error)

// MetadataSHA256 is the user metadata key holding an object's SHA-256.
const MetadataSHA256 = "sha256"

// MaxObjectBytes is the largest artifact a Store writes: 5 GiB, the limit
// of the single CopyObject that finalises a large upload. A larger maxBytes
// is refused with ErrInvalidArgument.
const MaxObjectBytes int64 = 5 << 30

// stagingDir is the directory under the store's prefix that holds large
// uploads until their checksum is known. Artifact keys always have at
// least four segments under the prefix and staging keys exactly two, so the
// two never collide.
const stagingDir = ".sluice-staging"

// minPartSize is S3's smallest multipart part.
const minPartSize = 5 << 20

// StoreConfig configures a Store. Client and Bucket are required.
type StoreConfig struct {
	// Client talks to S3; see NewS3Client. Required.
	Client *s3.Client
	// Bucket receives the artifacts. Required.
	Bucket string
	// Prefix starts every key (SLUICE_S3_PREFIX); a trailing "/" is
	// dropped. Defaults to "sluice".
	Prefix string
	// PartSize is the multipart part size and the largest object written
	// with a single PUT. At least 5 MiB. Defaults to 8 MiB.
	PartSize int64
	// Concurrency is how many parts of one object are uploaded at once.
	// Defaults to 2.
	Concurrency int
	// MaxUploads bounds how many Puts of objects larger than SmallSize run
	// at once in this Store; further ones wait. With PartSize and
	// Concurrency it bounds the memory of uploads: such a Put holds about
	// PartSize × (Concurrency + 4) bytes (48 MiB with the defaults,
	// whatever the object's size). Defaults to 4.
	MaxUploads int
	// SmallSize is the size up to which an object is small: read into a
	// buffer of SmallSize and written with one PUT, without one of the
	// MaxUploads slots. Every Put starts as a small one: 4 × MaxUploads
	// Puts at once read their first SmallSize bytes, and those that turn
	// out larger move on to a MaxUploads slot. Defaults to 1 MiB, at most
	// PartSize.
	SmallSize int64
	// MaxAttempts bounds the attempts of Copy, and those of the single PUT
	// of a small object. Defaults to 4.
	MaxAttempts int
	// MinBackoff is Copy's first delay between attempts, doubled for each
	// further one. Defaults to 1s.
	MinBackoff time.Duration
	// MaxBackoff caps Copy's delay, including one asked for by the source
	// with Retry-After. Defaults to 30s.
	MaxBackoff time.Duration
	// Sleep waits between attempts of Copy; it returns ctx's error when ctx
	// ends first. Defaults to a timer.
	Sleep func(context.Context, time.Duration) error
	// Logger receives warnings that do not fail a copy (a staging object
	// left behind). Defaults to a disabled logger.
	Logger *zerolog.Logger
}

// withDefaults fills the unset fields.
func (c StoreConfig) withDefaults() StoreConfig {
	c.Prefix = strings.TrimRight(cmp.Or(c.Prefix, "sluice"), "/")
	c.PartSize = cmp.Or(c.PartSize, 8<<20)
	c.Concurrency = cmp.Or(c.Concurrency, 2)
	c.MaxUploads = cmp.Or(c.MaxUploads, 4)
	c.SmallSize = min(cmp.Or(c.SmallSize, 1<<20), c.PartSize)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 4)
	c.MinBackoff = cmp.Or(c.MinBackoff, time.Second)
	c.MaxBackoff = cmp.Or(c.MaxBackoff, 30*time.Second)
	if c.Sleep == nil {
		c.Sleep = backoff.Sleep
	}
	if c.Logger == nil {
		nop := zerolog.Nop()
		c.Logger = &nop
	}
	return c
}

// validate checks the fields; errors wrap ErrInvalidArgument and name the
// field.
func (c StoreConfig) validate() error {
	switch {
	case c.Client == nil:
		return invalidf("Client", "required")
	case c.Bucket == "":
		return invalidf("Bucket", "required")
	case hasControl(c.Bucket) || strings.Contains(c.Bucket, "/"):
		return invalidf("Bucket", "%q is not a bucket name", printable(c.Bucket))
	case c.Prefix == "":
		return invalidf("Prefix", "must not be only slashes")
	case c.PartSize < minPartSize:
		return invalidf("PartSize", "%d bytes, less than S3's minimum of %d", c.PartSize, minPartSize)
	case c.PartSize > 512<<20:
		return invalidf("PartSize", "%d bytes, more than 512 MiB", c.PartSize)
	case c.Concurrency < 1:
		return invalidf("Concurrency", "must be at least 1")
	case c.MaxUploads < 1:
		return invalidf("MaxUploads", "must be at least 1")
	case c.SmallSize < 1:
		return invalidf("SmallSize", "must be at least 1")
	case c.MaxAttempts < 1:
		return invalidf("MaxAttempts", "must be at least 1")
	case c.MinBackoff < 0 || c.MaxBackoff < c.MinBackoff:
		return invalidf("MaxBackoff", "must be at least MinBackoff (%s)", c.MinBackoff)
	}
	return checkRelPath("Prefix", c.Prefix, MaxPrefixBytes)
}

// Store writes artifacts to one bucket under one prefix, and reads,
// presigns and inspects S3 objects. It is safe for concurrent use.
type Store struct {
	cfg    StoreConfig
	client *s3.Client
	tm     *transfermanager.Client
	prefix string
	// slots and bufs serve Puts of objects larger than SmallSize (PartSize
	// buffers); smallSlots and smallBufs every Put's first SmallSize bytes.
	slots      chan struct{}
	bufs       sync.Pool
	smallSlots chan struct{}
	smallBufs  sync.Pool
	// puts runs the SDK's PutObject calls of small objects (putSmall).
	// The SDK's middleware stack is deep: a goroutine that runs a PUT grows
	// its stack to several times the start size, and the collector halves
	// an idle goroutine's stack at every cycle. Spread over the runner's
	// many goroutines, most PUTs grew a stack again (copying it twice);
	// on the few goroutines of this pool a PUT usually finds the stack its
	// last one grew (BENCHMARKS.md, "The cost of a job").
	puts *gopool.Pool
}

// NewStore returns a Store for cfg. It fails with ErrInvalidArgument when a
// field is invalid; it does not contact S3 (see EnsureBucket).
func NewStore(cfg StoreConfig) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{
		cfg:    cfg,
		client: cfg.Client,
		prefix: cfg.Prefix,
		slots:  make(chan struct{}, cfg.MaxUploads),

		smallSlots: make(chan struct{}, 4*cfg.MaxUploads),
		puts:       gopool.New(0),
	}
	s.tm = transfermanager.New(cfg.Client, func(o *transfermanager.Options) {
		o.PartSizeBytes = cfg.PartSize
		o.MultipartUploadThreshold = cfg.PartSize
		o.Concurrency = cfg.Concurrency
		// Abort a failed multipart upload even when ctx was cancelled.
		o.FailTimeout = 30 * time.Second
	})
	s.bufs.New = func() any {
		b := make([]byte, cfg.PartSize)
		return &b
	}
	s.smallBufs.New = func() any {
		b := make([]byte, cfg.SmallSize)
		return &b
	}
	return s, nil
}

// Bucket returns the bucket artifacts are written to.
func (s *Store) Bucket() string { return s.cfg.Bucket }

// EnsureBucket creates the bucket when it does not exist. A bucket that
// exists and is accessible, including one created concurrently by another
// worker, is fine.
func (s *Store) EnsureBucket(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.cfg.Bucket)})
	if err == nil {
		return nil
	}
	if httpStatus(err) != http.StatusNotFound {
		return fmt.Errorf("artifacts: check bucket %s: %w", s.cfg.Bucket, err)
	}
	in := &s3.CreateBucketInput{Bucket: aws.String(s.cfg.Bucket)}
	if region := s.client.Options().Region; region != "" && region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(region),
		}
	}
	_, err = s.client.CreateBucket(ctx, in)
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*types.BucketAlreadyOwnedByYou](err); ok {
		return nil
	}
	// Another worker may have won the race: accept the bucket if we can
	// reach it now.
	if _, herr := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.cfg.Bucket)}); herr == nil {
		return nil
	}
	return fmt.Errorf("artifacts: create bucket %s: %w", s.cfg.Bucket, err)
}

// CheckBucket asks whether the bucket exists and these credentials reach
// it (HeadBucket: the ListBucket permission). Its error is scrubbed.
func (s *Store) CheckBucket(ctx context.Context) error {
	if _, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.cfg.Bucket)}); err != nil {
		return scrubErr(fmt.Errorf("artifacts: check bucket %s: %w", s.cfg.Bucket, err))
	}
	return nil
}

// Put streams r into the object key and returns what it
// wrote. The bytes are hashed and counted on the way and never held whole:
// an object of at most PartSize bytes is written with one PUT carrying its
// Content-Type and sha256 metadata; a larger one is uploaded in parts to a
// staging key under the prefix, copied server-side onto key with the
// metadata, and the staging object deleted, so a reader of key never sees
// it without its sha256. contentType "" is derived from key's extension.
// More than maxBytes bytes fail with ErrTooLarge; maxBytes must be in
// (0, MaxObjectBytes]. Put reads r once: an object of at most PartSize
// bytes, held in memory anyway, is PUT again after a transient failure (up
// to MaxAttempts times); a larger upload is not retried (see Copy). When r
// announces its length (a Size method returning at least 0, as the bodies
// of Fetcher.Open, Store.Open and the compute download do), a source that
// ends at another length fails with ErrShortBody and nothing is written.
// A write the store refuses for a lasting reason (IsStoreRefusal) fails
// with ErrStoreRefused.
func (s *Store) Put(ctx context.Context, key, contentType, source string, r io.Reader, maxBytes int64) (Artifact, error) {
	if err := s.checkPut(key, maxBytes); err != nil {
		return Artifact{}, err
	}
	if contentType == "" {
		contentType = ContentType("", key)
	}
	h := sha256.New()
	lr := &limitReader{r: r, max: maxBytes, want: announcedSize(r)}
	body := io.TeeReader(lr, h)
	err := s.put(ctx, key, contentType, body, h)
	if err != nil && IsStoreRefusal(err) {
		return Artifact{}, fmt.Errorf("artifacts: put %s: %w: %w", key, ErrStoreRefused, err)
	}
	if err != nil {
		return Artifact{}, fmt.Errorf("artifacts: put %s: %w", key, err)
	}
	return Artifact{
		URL:         "s3://" + s.cfg.Bucket + "/" + key,
		Bucket:      s.cfg.Bucket,
		Key:         key,
		Size:        lr.n,
		SHA256:      hexSum(h),
		ContentType: contentType,
		Source:      redact.Text(source),
	}, nil
}

// put reads body's first SmallSize bytes under a small slot: an object
// that ends there is written with one PUT. A larger one moves on to an
// upload slot and a PartSize buffer: it is written with one PUT when it
// ends within PartSize, else by putLarge.
func (s *Store) put(ctx context.Context, key, contentType string, body io.Reader, h hash.Hash) error {
	release, err := acquire(ctx, s.smallSlots)
	if err != nil {
		return err
	}
	sbp := s.smallBufs.Get().(*[]byte)
	head := *sbp
	n, err := fill(body, head)
	if err != nil { // the whole object was read (io.EOF), or reading failed
		if err == io.EOF {
			err = s.putSmall(ctx, key, contentType, head[:n], hexSum(h))
		} else {
			err = fmt.Errorf("read source: %w", err)
		}
		s.smallBufs.Put(sbp)
		release()
		return err
	}

	releaseLarge, err := acquire(ctx, s.slots)
	if err != nil {
		s.smallBufs.Put(sbp)
		release()
		return err
	}
	defer releaseLarge()
	bp := s.bufs.Get().(*[]byte)
	defer s.bufs.Put(bp)
	buf := *bp
	copy(buf, head[:n])
	s.smallBufs.Put(sbp)
	release()

	m, err := fill(body, buf[n:])
	switch {
	case err == io.EOF: // the whole source fits one part
		return s.putSmall(ctx, key, contentType, buf[:n+m], hexSum(h))
	case err != nil:
		return fmt.Errorf("read source: %w", err)
	}
	return s.putLarge(ctx, key, contentType, io.MultiReader(bytes.NewReader(buf), body), h)
}

// acquire takes a slot of sem, or fails when ctx ends first.
func acquire(ctx context.Context, sem chan struct{}) (release func(), err error) {
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// checkPut validates the arguments shared by Put and Copy.
func (s *Store) checkPut(key string, maxBytes int64) error {
	rel, ok := strings.CutPrefix(key, s.prefix+"/")
	if !ok {
		return invalidf("key", "%q is not under the prefix %q", printable(key), s.prefix)
	}
	if err := checkRelPath("key", rel, maxKeyBytes); err != nil {
		return err
	}
	if strings.HasPrefix(rel, stagingDir+"/") && strings.Count(rel, "/") == 1 {
		return invalidf("key", "%q is a staging key", printable(key))
	}
	if maxBytes <= 0 || maxBytes > MaxObjectBytes {
		return invalidf("maxBytes", "%d is not in (0, %d]", maxBytes, MaxObjectBytes)
	}
	return nil
}

// putSmall writes a whole object with one PUT. Its bytes are in memory,
// so a PUT that fails for a passing reason (S3 unreachable, 5xx, 429) is
// sent again, up to MaxAttempts times with Copy's backoff, without reading
// the source again: a source that cannot be read twice (a speech stream)
// survives a short S3 outage.
func (s *Store) putSmall(ctx context.Context, key, contentType string, b []byte, sum string) error {
	put := func() error {
		done := make(chan error, 1)
		s.puts.Go(func() {
			_, err := s.client.PutObject(withWholeBody(ctx, b), &s3.PutObjectInput{
				Bucket:        aws.String(s.cfg.Bucket),
				Key:           aws.String(key),
				Body:          bytes.NewReader(b),
				ContentLength: aws.Int64(int64(len(b))),
				ContentType:   aws.String(contentType),
				Metadata:      map[string]string{MetadataSHA256: sum},
			}, s3.WithAPIOptions(withPayloadSHA256(sum)))
			done <- err
		})
		return <-done
	}
	for attempt := 1; ; attempt++ {
		err := put()
		if err == nil || attempt >= s.cfg.MaxAttempts || !IsTemporary(err) || ctx.Err() != nil {
			return err
		}
		if s.cfg.Sleep(ctx, s.delay(attempt, err)) != nil {
			return err
		}
	}
}

// withPayloadSHA256 hands the SDK's request signer sum, the hex SHA-256
// of the request's body that Put computed already for the object's
// metadata, so that over plain HTTP, where SigV4 signs the payload's hash,
// the SDK does not hash the body a second time. S3 checks the body against
// the signed hash, so a wrong sum fails the PUT rather than storing
// something else. Over HTTPS nothing changes: the SDK's checksum
// middleware, which runs after this one, still sends the body unsigned
// with a trailing CRC32 checksum.
func withPayloadSHA256(sum string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("SluicePayloadSHA256",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				return next.HandleFinalize(v4.SetPayloadHash(ctx, sum), in)
			}), middleware.Before)
	}
}

// putLarge uploads body in parts to a fresh staging key, then copies it
// onto key with the checksum that h holds once body is consumed.
func (s *Store) putLarge(ctx context.Context, key, contentType string, body io.Reader, h hash.Hash) error {
	staging, err := s.stagingKey()
	if err != nil {
		return err
	}
	_, err = s.tm.UploadObject(ctx, &transfermanager.UploadObjectInput{
		Bucket:      aws.String(s.cfg.Bucket),
		Key:         aws.String(staging),
		Body:        body,
		ContentType: aws.String(contentType),
	})
	if err != nil {
		// The transfer manager aborts the multipart upload itself.
		return fmt.Errorf("upload: %w", err)
	}
	defer s.deleteStaging(ctx, staging)
	_, err = s.client.CopyObject(ctx, &s3.CopyObjectInput{
		Bucket:            aws.String(s.cfg.Bucket),
		Key:               aws.String(key),
		CopySource:        aws.String(copySource(s.cfg.Bucket, staging)),
		MetadataDirective: types.MetadataDirectiveReplace,
		ContentType:       aws.String(contentType),
		Metadata:          map[string]string{MetadataSHA256: hexSum(h)},
	})
	if err != nil {
		return fmt.Errorf("finalise from staging: %w", err)
	}
	return nil
}

// stagingKey returns a fresh, random staging key.
func (s *Store) stagingKey() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("staging key: %w", err)
	}
	return s.prefix + "/" + stagingDir + "/" + hex.EncodeToString(b[:]), nil
}

// deleteStaging removes a staging object, even when ctx has ended; a
// failure only leaves garbage behind (see the lifecycle rule in docs/operating.md).
func (s *Store) deleteStaging(ctx context.Context, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.cfg.Bucket),
		Key:    aws.String(key),
	})
	if err != nil {
		s.cfg.Logger.Warn().Err(err).Str("bucket", s.cfg.Bucket).Str("key", key).
			Msg("artifacts: staging object left behind")
	}
}

// copySource is the x-amz-copy-source value of an object: bucket and key
// percent-encoded segment by segment, with "+" encoded too because some
// stores decode it as a space.
func copySource(bucket, key string) string {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		segs[i] = strings.ReplaceAll(url.PathEscape(seg), "+", "%2B")
	}
	return url.PathEscape(bucket) + "/" + strings.Join(segs, "/")
}

// Presign returns a presigned GET URL of bucket/key valid for ttl (1 h when
// zero, at most 7 days). It signs locally without contacting S3; the URL
// carries credentials in its query and must never be logged (see redact.URL).
// URLs signed with temporary credentials stop working when those expire.
func (s *Store) Presign(ctx context.Context, bucket, key string, ttl time.Duration) (string, error) {
	switch {
	case bucket == "" || hasControl(bucket):
		return "", invalidf("bucket", "%q is not a bucket name", printable(bucket))
	case key == "" || hasControl(key):
		return "", invalidf("key", "%q is not an object key", printable(key))
	case ttl < 0 || ttl > 7*24*time.Hour:
		return "", invalidf("ttl", "%s is not in [0, 168h]", ttl)
	}
	ttl = cmp.Or(ttl, time.Hour)
	req, err := s3.NewPresignClient(s.client).PresignGetObject(ctx,
		&s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("artifacts: presign s3://%s/%s: %w", bucket, key, err)
	}
	return req.URL, nil
}

// Open starts reading the object bucket/key; the caller closes the body,
// whose Size method reports the object's length (-1 when S3 gave none).
// A missing object or bucket fails with ErrNotFound.
func (s *Store) Open(ctx context.Context, bucket, key string) (io.ReadCloser, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("artifacts: open s3://%s/%s: %w", bucket, key, notFound(err))
	}
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	return sizedBody{ReadCloser: out.Body, size: size}, nil
}

// sizedBody is an object's body that knows its length, so a consumer
// that needs it up front (the compute chunked upload) need not count.
type sizedBody struct {
	io.ReadCloser
	size int64
}

// Size returns the object's length, -1 when unknown.
func (b sizedBody) Size() int64 { return b.size }

// Stat returns the size and the sha256 metadata ("" when absent) of the
// object key in the store's bucket. A missing object fails with
// ErrNotFound.
func (s *Store) Stat(ctx context.Context, key string) (size int64, sha256 string, err error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key)})
	if err != nil {
		return 0, "", fmt.Errorf("artifacts: stat s3://%s/%s: %w", s.cfg.Bucket, key, notFound(err))
	}
	return aws.ToInt64(out.ContentLength), out.Metadata[MetadataSHA256], nil
}

// notFound adds ErrNotFound to an S3 error that says 404.
func notFound(err error) error {
	if httpStatus(err) == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return err
}

// fill reads from r until buf is full (returning a nil error) or r fails.
// Only a plain io.EOF from r means the source ended: unlike io.ReadFull it
// never mistakes a source's own io.ErrUnexpectedEOF (a truncated download)
// for a short, complete one.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// hexSum returns h's sum in lower-case hex.
func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// announcedSize is the length r announces through a Size method, or -1.
func announcedSize(r io.Reader) int64 {
	if s, ok := r.(interface{ Size() int64 }); ok {
		return s.Size()
	}
	return -1
}

// limitReader counts what it reads and fails with ErrTooLarge as soon as
// more than max bytes came from r, and with ErrShortBody when r ends at
// another length than want (unless want is -1, unknown): a body cut short
// whose reader says io.EOF all the same is never taken for whole.
type limitReader struct {
	r    io.Reader
	max  int64
	want int64
	n    int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n > l.max {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, l.max)
	}
	if rest := l.max - l.n + 1; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.max {
		return n - int(l.n-l.max), fmt.Errorf("%w: more than %d bytes", ErrTooLarge, l.max)
	}
	if err == io.EOF && l.want >= 0 && l.n != l.want {
		return n, fmt.Errorf("%w: %d bytes read, the source announced %d", ErrShortBody, l.n, l.want)
	}
	return n, err
}
