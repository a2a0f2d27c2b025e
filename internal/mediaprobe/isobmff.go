package mediaprobe

import (
	"encoding/binary"
	"io"
)

// Bounds of the ISO base media file walk (MP4, MOV, HEIF).
const (
	// maxTopBoxes is how many top-level boxes are looked at for the one
	// wanted: a file with more is refused rather than read box by box.
	maxTopBoxes = 4096
	// maxBoxes bounds the children walked in one box.
	maxBoxes = 4096
	// maxMoovBytes bounds the moov box read into memory. A 15 s clip's
	// moov is a few kilobytes; one of 16 MiB is refused.
	maxMoovBytes = 16 << 20
	// maxMetaBytes bounds a HEIF meta box read into memory.
	maxMetaBytes = 4 << 20
)

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// box is one box of an in-memory body: its type and its payload.
type box struct {
	typ  string
	body []byte
}

// walkBoxes calls fn for each box in b, in order, until fn returns false,
// b ends, or a box header does not fit.
func walkBoxes(b []byte, fn func(box) bool) {
	for n := 0; len(b) >= 8 && n < maxBoxes; n++ {
		size := uint64(be32(b))
		typ := string(b[4:8])
		hdr := uint64(8)
		switch size {
		case 0:
			size = uint64(len(b))
		case 1:
			if len(b) < 16 {
				return
			}
			size, hdr = be64(b[8:]), 16
		}
		if size < hdr || size > uint64(len(b)) {
			return
		}
		if !fn(box{typ: typ, body: b[hdr:size]}) {
			return
		}
		b = b[size:]
	}
}

// childBox returns the payload of the first box of type typ in b.
func childBox(b []byte, typ string) ([]byte, bool) {
	var out []byte
	found := false
	walkBoxes(b, func(x box) bool {
		if x.typ == typ {
			out, found = x.body, true
			return false
		}
		return true
	})
	return out, found
}

// boxPath returns the payload at a path of nested box types.
func boxPath(b []byte, path ...string) ([]byte, bool) {
	for _, typ := range path {
		var ok bool
		if b, ok = childBox(b, typ); !ok {
			return nil, false
		}
	}
	return b, true
}

// findTopBox reads the top-level boxes of r (size bytes long) by their
// headers alone, wherever they sit, and returns the payload of the first
// of type typ, at most limit bytes. It reads 16 bytes per box it skips.
func findTopBox(r io.ReaderAt, size int64, typ string, limit int64) ([]byte, error) {
	var hdr [16]byte
	off := int64(0)
	for n := 0; n < maxTopBoxes; n++ {
		if off >= size {
			return nil, malformed("no %s box in the file", typ)
		}
		if size-off < 8 {
			return nil, malformed("truncated box header at offset %d", off)
		}
		h := hdr[:min(16, size-off)]
		if err := readFull(r, h, off); err != nil {
			return nil, err
		}
		boxSize := int64(be32(h))
		hlen := int64(8)
		switch boxSize {
		case 0:
			boxSize = size - off
		case 1:
			if len(h) < 16 {
				return nil, malformed("truncated box header at offset %d", off)
			}
			large := be64(h[8:])
			if large > uint64(size) {
				return nil, malformed("truncated: the %q box at offset %d claims %d bytes, the file has %d", string(h[4:8]), off, large, size)
			}
			boxSize, hlen = int64(large), 16
		}
		if boxSize < hlen {
			return nil, malformed("box at offset %d has an impossible size %d", off, boxSize)
		}
		if boxSize > size-off {
			return nil, malformed("truncated: the %q box at offset %d claims %d bytes, %d remain", string(h[4:8]), off, boxSize, size-off)
		}
		if string(h[4:8]) == typ {
			if boxSize-hlen > limit {
				return nil, malformed("the %s box has %d bytes, more than sluice reads (%d)", typ, boxSize-hlen, limit)
			}
			body := make([]byte, boxSize-hlen)
			if err := readFull(r, body, off+hlen); err != nil {
				return nil, err
			}
			return body, nil
		}
		off += boxSize
	}
	return nil, malformed("no %s box among the first %d top-level boxes", typ, maxTopBoxes)
}
