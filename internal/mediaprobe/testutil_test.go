package mediaprobe

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"sync/atomic"
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

func fixture(t testing.TB, name string) []byte { return testmedia.Fixture(t, name) }

// counting is an io.ReaderAt that counts the bytes asked of it.
type counting struct {
	r     io.ReaderAt
	bytes atomic.Int64
	calls atomic.Int64
}

func (c *counting) ReadAt(p []byte, off int64) (int, error) {
	c.calls.Add(1)
	n, err := c.r.ReadAt(p, off)
	c.bytes.Add(int64(n))
	return n, err
}

// pngHeader returns the signature and IHDR chunk of a w×h PNG: all
// DecodeConfig reads.
func pngHeader(w, h int) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 17)
	copy(ihdr, "IHDR")
	binary.BigEndian.PutUint32(ihdr[4:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[8:], uint32(h))
	ihdr[12], ihdr[13] = 8, 2 // 8-bit RGB
	_ = binary.Write(&b, binary.BigEndian, uint32(13))
	b.Write(ihdr)
	_ = binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(ihdr))
	return b.Bytes()
}
