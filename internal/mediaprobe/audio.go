package mediaprobe

import (
	"encoding/binary"
	"io"
	"time"
)

// maxChunks bounds the RIFF chunks walked in a WAV file.
const maxChunks = 1024

// probeWAV reads a WAV file's fmt and data chunk headers.
func probeWAV(r io.ReaderAt, info *Info) error {
	var hdr [8]byte
	off := int64(12)
	byteRate := uint32(0)
	for n := 0; n < maxChunks; n++ {
		if info.Size-off < 8 {
			return malformed("WAV file has no data chunk")
		}
		if err := readFull(r, hdr[:], off); err != nil {
			return err
		}
		id, size := string(hdr[:4]), int64(binary.LittleEndian.Uint32(hdr[4:]))
		body := off + 8
		switch id {
		case "fmt ":
			if size < 16 {
				return malformed("WAV fmt chunk has %d bytes, want at least 16", size)
			}
			var f [16]byte
			if err := readFull(r, f[:], body); err != nil {
				return err
			}
			byteRate = binary.LittleEndian.Uint32(f[8:])
		case "data":
			if byteRate == 0 {
				return malformed("WAV data chunk comes before a fmt chunk with a byte rate")
			}
			if size == 0xFFFFFFFF { // written while streaming: to the end
				size = info.Size - body
			}
			if size > info.Size-body {
				return malformed("truncated: the WAV data chunk claims %d bytes, %d remain", size, info.Size-body)
			}
			info.Duration = time.Duration(float64(size) / float64(byteRate) * float64(time.Second))
			return nil
		}
		off = body + size + size&1
	}
	return malformed("no WAV data chunk among the first %d chunks", maxChunks)
}

// frameHeader is an MPEG audio frame header.
type frameHeader struct {
	mpeg1      bool
	sampleRate int
	bitRate    int // bits per second
	padding    bool
	mono       bool
}

// samples is the number of samples per layer III frame.
func (h frameHeader) samples() int {
	if h.mpeg1 {
		return 1152
	}
	return 576
}

// length is the frame's length in bytes.
func (h frameHeader) length() int {
	n := h.samples() / 8 * h.bitRate / h.sampleRate
	if h.padding {
		n++
	}
	return n
}

var (
	bitRatesV1 = [16]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0}
	bitRatesV2 = [16]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0}
	sampleRate = [4]int{44100, 48000, 32000, 0}
)

// parseFrameHeader parses an MPEG-1/2/2.5 layer III frame header at the
// start of b.
func parseFrameHeader(b []byte) (frameHeader, bool) {
	if len(b) < 4 || b[0] != 0xFF || b[1]&0xE0 != 0xE0 {
		return frameHeader{}, false
	}
	version := (b[1] >> 3) & 3 // 0: 2.5, 2: 2, 3: 1
	layer := (b[1] >> 1) & 3   // 1: layer III
	bi, si := b[2]>>4, (b[2]>>2)&3
	if version == 1 || layer != 1 || bi == 0 || bi == 15 || si == 3 {
		return frameHeader{}, false
	}
	h := frameHeader{mpeg1: version == 3, padding: b[2]&2 != 0, mono: b[3]>>6 == 3}
	h.sampleRate = sampleRate[si]
	switch version {
	case 2:
		h.sampleRate /= 2
	case 0:
		h.sampleRate /= 4
	}
	if h.mpeg1 {
		h.bitRate = bitRatesV1[bi] * 1000
	} else {
		h.bitRate = bitRatesV2[bi] * 1000
	}
	return h, true
}

// mp3Scan is how far past the ID3 tag the first frame is looked for.
const mp3Scan = 64 << 10

// probeMP3 finds the first frame after any ID3v2 tag, checks that a
// second frame follows it, and reads the duration from a Xing/Info or VBRI
// header, else from the size and the bit rate.
func probeMP3(r io.ReaderAt, info *Info) error {
	start := int64(0)
	var id3 [10]byte
	if err := readFull(r, id3[:min(10, int(info.Size))], 0); err != nil {
		return err
	}
	if info.Size >= 10 && string(id3[:3]) == "ID3" {
		n := int64(id3[6]&0x7F)<<21 | int64(id3[7]&0x7F)<<14 | int64(id3[8]&0x7F)<<7 | int64(id3[9]&0x7F)
		start = 10 + n
		if id3[5]&0x10 != 0 {
			start += 10
		}
	}
	if start >= info.Size {
		return malformed("MP3 file holds an ID3 tag and no audio")
	}
	buf := make([]byte, min(mp3Scan, info.Size-start))
	if err := readFull(r, buf, start); err != nil {
		return err
	}
	for i := 0; i+4 <= len(buf); i++ {
		h, ok := parseFrameHeader(buf[i:])
		if !ok {
			continue
		}
		next := i + h.length()
		if next+4 <= len(buf) {
			if _, ok := parseFrameHeader(buf[next:]); !ok {
				continue
			}
		} else if start+int64(next) < info.Size {
			continue // a lone sync word: no frame follows where it should
		}
		return mp3Duration(buf[i:], h, info, start+int64(i), r)
	}
	return malformed("no MPEG audio layer III frame in the first %d bytes", len(buf))
}

// mp3Duration computes the duration from the first frame f (its bytes at
// audioStart).
func mp3Duration(f []byte, h frameHeader, info *Info, audioStart int64, r io.ReaderAt) error {
	side := 32
	switch {
	case h.mpeg1 && h.mono:
		side = 17
	case !h.mpeg1 && !h.mono:
		side = 17
	case !h.mpeg1 && h.mono:
		side = 9
	}
	per := float64(h.samples()) / float64(h.sampleRate)
	if x := 4 + side; len(f) >= x+12 && (string(f[x:x+4]) == "Xing" || string(f[x:x+4]) == "Info") {
		if flags := be32(f[x+4:]); flags&1 != 0 {
			frames := int64(be32(f[x+8:]))
			samples := frames * int64(h.samples())
			samples -= lameGap(f[x:], flags, samples)
			info.Duration = time.Duration(float64(samples) / float64(h.sampleRate) * float64(time.Second))
			return nil
		}
	}
	if x := 4 + 32; len(f) >= x+18 && string(f[x:x+4]) == "VBRI" {
		frames := be32(f[x+14:])
		info.Duration = time.Duration(float64(frames) * per * float64(time.Second))
		return nil
	}
	audio := info.Size - audioStart
	if audio > 128 {
		var tag [3]byte
		if err := readFull(r, tag[:], info.Size-128); err != nil {
			return err
		}
		if string(tag[:]) == "TAG" {
			audio -= 128
		}
	}
	info.Duration = time.Duration(float64(audio) * 8 / float64(h.bitRate) * float64(time.Second))
	return nil
}

// lameGap returns the encoder delay plus padding, in samples, that the
// LAME tag after a Xing/Info header (x, starting at "Xing") records, or 0
// when there is none or it is not smaller than total. The player drops
// these samples, so they are not part of the clip.
func lameGap(x []byte, flags uint32, total int64) int64 {
	o := 8
	for _, f := range []struct {
		bit  uint32
		size int
	}{{1, 4}, {2, 4}, {4, 100}, {8, 4}} {
		if flags&f.bit != 0 {
			o += f.size
		}
	}
	// The LAME tag: a 9-byte encoder string, then 12 bytes of revision,
	// lowpass, replay gain, flags and bit rate, then 12 bits of delay and
	// 12 bits of padding.
	if len(x) < o+24 || x[o] < 'A' || x[o] > 'z' {
		return 0
	}
	d := x[o+21:]
	gap := int64(d[0])<<4 | int64(d[1])>>4 + (int64(d[1]&0x0F)<<8 | int64(d[2]))
	if gap >= total {
		return 0
	}
	return gap
}
