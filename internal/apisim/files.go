package apisim

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
)

// ResultBytes returns the content of result n of task taskID when it is
// size bytes long: a deterministic pseudo-random stream (AES-CTR keyed by a
// hash of taskID and n) generated on the fly, so tests can compute the
// sha256 a download must have without holding the file. The returned
// reader also implements io.Seeker. For a speech stream the audio is
// ResultBytes(<request_id>, 0, size).
func ResultBytes(taskID string, n int, size int64) io.Reader {
	return newResultReader(taskID, n, size)
}

// resultReader is the io.ReadSeeker behind ResultBytes.
type resultReader struct {
	block  cipher.Block
	size   int64
	off    int64
	stream cipher.Stream // keystream positioned at off
}

func newResultReader(taskID string, n int, size int64) *resultReader {
	key := sha256.Sum256([]byte("sluice-apisim-result\x00" + taskID + "\x00" + strconv.Itoa(n)))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		panic(err) // a 32-byte key is always valid
	}
	r := &resultReader{block: block, size: max(size, 0)}
	r.position(0)
	return r
}

// position moves the keystream to byte off.
func (r *resultReader) position(off int64) {
	var iv [aes.BlockSize]byte
	binary.BigEndian.PutUint64(iv[8:], uint64(off/aes.BlockSize))
	r.stream = cipher.NewCTR(r.block, iv[:])
	if skip := off % aes.BlockSize; skip > 0 {
		var scratch [aes.BlockSize]byte
		r.stream.XORKeyStream(scratch[:skip], scratch[:skip])
	}
	r.off = off
}

func (r *resultReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	if rest := r.size - r.off; int64(len(p)) > rest {
		p = p[:rest]
	}
	clear(p)
	r.stream.XORKeyStream(p, p)
	r.off += int64(len(p))
	return len(p), nil
}

func (r *resultReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.size + offset
	default:
		return 0, errors.New("apisim: bad whence")
	}
	if abs < 0 {
		return 0, errors.New("apisim: negative position")
	}
	r.position(abs)
	return abs, nil
}
