package artifacts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// InputsDir is the key segment, below the store's prefix, under which
// media inputs uploaded by enqueue are kept by content:
// <prefix>/inputs/sha256/<hex><ext>.
const InputsDir = "inputs/sha256"

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// InputKey returns the key of an input whose bytes have the lower-case
// hex SHA-256 sum and whose file extension is ext (".png", ...).
func (s *Store) InputKey(sum, ext string) (string, error) {
	if !sha256Hex.MatchString(sum) {
		return "", invalidf("sha256", "%q is not a lower-case hex SHA-256", printable(sum))
	}
	if ext != "" && (!strings.HasPrefix(ext, ".") || !isSafeName(ext[1:])) {
		return "", invalidf("ext", "%q is not a file extension", printable(ext))
	}
	parts := []string{InputsDir, sum + ext}
	if s.prefix != "" {
		parts = append([]string{s.prefix}, parts...)
	}
	return strings.Join(parts, "/"), nil
}

// PutInput stores a media input by its content: under InputKey(sum, ext),
// streamed from r with its sha256 in metadata like every object. When an
// object with that key and that sha256 exists already nothing is sent and
// uploaded is false, so uploading the same bytes again costs one HEAD. r
// must yield the bytes whose sum is sum: other bytes (a file changed while
// it was read) fail the upload, and the object is deleted again so that
// the key never names other bytes.
func (s *Store) PutInput(ctx context.Context, r io.Reader, sum, ext, contentType, source string, maxBytes int64) (art Artifact, uploaded bool, err error) {
	key, err := s.InputKey(sum, ext)
	if err != nil {
		return Artifact{}, false, err
	}
	size, have, err := s.Stat(ctx, key)
	switch {
	case err == nil && have == sum:
		return Artifact{URL: "s3://" + s.cfg.Bucket + "/" + key, Bucket: s.cfg.Bucket, Key: key, Size: size, SHA256: sum,
			ContentType: contentType, Source: source}, false, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return Artifact{}, false, err
	}
	art, err = s.Put(ctx, key, contentType, source, r, maxBytes)
	if err != nil {
		return Artifact{}, false, err
	}
	if art.SHA256 != sum {
		_, _ = s.client.DeleteObject(context.WithoutCancel(ctx), &s3.DeleteObjectInput{Bucket: aws.String(s.cfg.Bucket), Key: aws.String(key)})
		return Artifact{}, false, fmt.Errorf("artifacts: put %s: the bytes read have sha256 %s, not %s (did the file change while it was uploaded?)", key, art.SHA256, sum)
	}
	return art, true, nil
}
