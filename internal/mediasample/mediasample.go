// Package mediasample makes small media files that pass the media API's
// input limits, for the demo and the chaos harness, which submit
// image-to-video and reference jobs without shipping media files: a PNG
// of one colour and a WAV of silence.
package mediasample

import (
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"time"
)

// PNG returns a w×h PNG of one colour.
func PNG(w, h int) []byte {
	img := image.NewUniform(color.RGBA{R: 0x33, G: 0x66, B: 0x99, A: 0xFF})
	var b bytes.Buffer
	// A uniform image has no bounds of its own: encode a bounded view.
	_ = png.Encode(&b, bounded{img, image.Rect(0, 0, w, h)})
	return b.Bytes()
}

type bounded struct {
	image.Image
	r image.Rectangle
}

func (b bounded) Bounds() image.Rectangle { return b.r }

// WAV returns a mono, 8 kHz, 8-bit PCM WAV of silence lasting d.
func WAV(d time.Duration) []byte {
	const rate = 8000
	n := int(d.Seconds() * rate)
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + n))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1))    // PCM
	le(uint16(1))    // mono
	le(uint32(rate)) // sample rate
	le(uint32(rate)) // byte rate
	le(uint16(1))    // block align
	le(uint16(8))    // bits per sample
	b.WriteString("data")
	le(uint32(n))
	b.Write(bytes.Repeat([]byte{0x80}, n)) // 8-bit PCM silence is 128
	return b.Bytes()
}
