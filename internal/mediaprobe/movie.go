package mediaprobe

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"time"
)

// track is what the moov says of one trak.
type track struct {
	handler   string // "vide", "soun", ...
	timescale uint32
	duration  uint64 // mdhd, in timescale units
	samples   uint64 // stts sample count
	deltas    uint64 // stts sum of sample durations
	entry     string // first sample entry's four-character code
	entryBody []byte
	width     int // visual sample entry
	height    int
	tkhdW     int // tkhd presentation size, integer part
	tkhdH     int
}

// probeMovie reads an MP4 or MOV file's moov box, wherever it sits, and
// fills the first video track's size, duration, frame rate and codec and
// every audio track's codec.
func probeMovie(r io.ReaderAt, info *Info) error {
	moov, err := findTopBox(r, info.Size, "moov", maxMoovBytes)
	if err != nil {
		return err
	}
	if _, ok := childBox(moov, "cmov"); ok {
		return malformed("the moov box is compressed (cmov), which sluice does not read")
	}
	var tracks []track
	walkBoxes(moov, func(b box) bool {
		if b.typ == "trak" {
			tracks = append(tracks, parseTrak(b.body))
		}
		return true
	})
	var video *track
	for i := range tracks {
		t := &tracks[i]
		switch t.handler {
		case "vide":
			if video == nil {
				video = t
			}
		case "soun":
			info.AudioCodecs = append(info.AudioCodecs, audioCodec(t))
		}
	}
	if video == nil {
		return malformed("%s file has no video track", info.Format)
	}
	info.VideoCodec = videoCodec(video.entry)
	info.Width, info.Height = video.width, video.height
	if info.Width == 0 || info.Height == 0 {
		info.Width, info.Height = video.tkhdW, video.tkhdH
	}
	if info.Width <= 0 || info.Height <= 0 {
		return malformed("the video track gives no picture size")
	}
	if video.timescale == 0 {
		return malformed("the video track has no timescale")
	}
	units := video.duration
	if units == 0 || units == math.MaxUint32 || units == math.MaxUint64 {
		units = video.deltas
	}
	if units == 0 || video.samples == 0 {
		return malformed("the video track has no samples in its moov (a fragmented MP4?)")
	}
	secs := float64(units) / float64(video.timescale)
	if secs > 1e6 {
		return malformed("the video track claims %.0f s", secs)
	}
	info.Duration = time.Duration(secs * float64(time.Second))
	span := video.deltas
	if span == 0 {
		span = units
	}
	info.FrameRate = float64(video.samples) * float64(video.timescale) / float64(span)
	return nil
}

// parseTrak reads the parts of a trak box that probeMovie needs.
func parseTrak(trak []byte) track {
	var t track
	if tkhd, ok := childBox(trak, "tkhd"); ok && len(tkhd) >= 4 {
		wOff := 76
		if tkhd[0] == 1 {
			wOff = 88
		}
		if len(tkhd) >= wOff+8 {
			t.tkhdW = int(be32(tkhd[wOff:]) >> 16)
			t.tkhdH = int(be32(tkhd[wOff+4:]) >> 16)
		}
	}
	mdia, ok := childBox(trak, "mdia")
	if !ok {
		return t
	}
	if hdlr, ok := childBox(mdia, "hdlr"); ok && len(hdlr) >= 12 {
		t.handler = string(hdlr[8:12])
	}
	if mdhd, ok := childBox(mdia, "mdhd"); ok && len(mdhd) >= 4 {
		if mdhd[0] == 1 && len(mdhd) >= 32 {
			t.timescale, t.duration = be32(mdhd[20:]), be64(mdhd[24:])
		} else if mdhd[0] == 0 && len(mdhd) >= 20 {
			t.timescale, t.duration = be32(mdhd[12:]), uint64(be32(mdhd[16:]))
		}
	}
	stbl, ok := boxPath(mdia, "minf", "stbl")
	if !ok {
		return t
	}
	if stsd, ok := childBox(stbl, "stsd"); ok && len(stsd) >= 8 {
		walkBoxes(stsd[8:], func(b box) bool {
			t.entry, t.entryBody = b.typ, b.body
			return false
		})
		// A visual sample entry: 6 reserved, data reference index, 16
		// bytes of pre-defined and reserved fields, then width, height.
		if t.handler == "vide" && len(t.entryBody) >= 28 {
			t.width, t.height = int(be16(t.entryBody[24:])), int(be16(t.entryBody[26:]))
		}
	}
	if stts, ok := childBox(stbl, "stts"); ok && len(stts) >= 8 {
		n := be32(stts[4:])
		e := stts[8:]
		for i := uint32(0); i < n && len(e) >= 8; i++ {
			count, delta := uint64(be32(e)), uint64(be32(e[4:]))
			t.samples += count
			t.deltas += count * delta
			e = e[8:]
		}
	}
	return t
}

// videoCodec names a video sample entry's codec.
func videoCodec(fourcc string) string {
	switch fourcc {
	case "avc1", "avc3":
		return "H.264"
	case "hvc1", "hev1":
		return "H.265"
	case "":
		return "none"
	}
	return describeFourCC(fourcc)
}

// audioCodec names an audio track's codec: for mp4a, by the object type
// of its esds descriptor.
func audioCodec(t *track) string {
	switch t.entry {
	case ".mp3":
		return "MP3"
	case "mp4a":
		oti, ok := esdsObjectType(t.entryBody)
		switch {
		case !ok, oti == 0x40, oti == 0x66, oti == 0x67, oti == 0x68:
			return "AAC"
		case oti == 0x69, oti == 0x6B:
			return "MP3"
		}
		return fmt.Sprintf("mp4a (object type 0x%02x)", oti)
	case "":
		return "none"
	}
	return describeFourCC(t.entry)
}

// describeFourCC quotes a four-character code, naming the common ones.
func describeFourCC(c string) string {
	names := map[string]string{
		"vp09": "VP9", "vp08": "VP8", "av01": "AV1", "mp4v": "MPEG-4 Part 2",
		"apcn": "ProRes", "apch": "ProRes", "apcs": "ProRes", "apco": "ProRes", "ap4h": "ProRes",
		"jpeg": "Motion JPEG", "mjpa": "Motion JPEG", "Opus": "Opus", "fLaC": "FLAC",
		"ac-3": "AC-3", "ec-3": "E-AC-3", "alac": "ALAC", "lpcm": "PCM", "sowt": "PCM",
		"twos": "PCM", "ipcm": "PCM", "fpcm": "PCM", "samr": "AMR",
	}
	q := fmt.Sprintf("%q", c)
	if n, ok := names[c]; ok {
		return n + " (" + q + ")"
	}
	return q
}

// esdsObjectType finds the esds box in a sample entry's body (directly or
// inside a QuickTime wave box) and returns its DecoderConfigDescriptor's
// objectTypeIndication.
func esdsObjectType(entry []byte) (byte, bool) {
	i := bytes.Index(entry, []byte("esds"))
	if i < 4 {
		return 0, false
	}
	size := int(be32(entry[i-4:]))
	if size < 12 || i-4+size > len(entry) {
		return 0, false
	}
	d := entry[i+8 : i-4+size] // after the full box header
	// ES_Descriptor (tag 3): ES_ID, flags, optional fields, then nested
	// descriptors, of which the DecoderConfigDescriptor (tag 4) starts with
	// the object type.
	tag, body, ok := descriptor(d)
	if !ok || tag != 3 || len(body) < 3 {
		return 0, false
	}
	flags := body[2]
	p := body[3:]
	if flags&0x80 != 0 {
		p = p[min(2, len(p)):]
	}
	if flags&0x40 != 0 && len(p) > 0 {
		p = p[min(1+int(p[0]), len(p)):]
	}
	if flags&0x20 != 0 {
		p = p[min(2, len(p)):]
	}
	tag, body, ok = descriptor(p)
	if !ok || tag != 4 || len(body) < 1 {
		return 0, false
	}
	return body[0], true
}

// descriptor splits an MPEG-4 descriptor: a tag and a length of up to four
// 7-bit bytes.
func descriptor(b []byte) (tag byte, body []byte, ok bool) {
	if len(b) < 2 {
		return 0, nil, false
	}
	tag = b[0]
	n, i := 0, 1
	for ; i < len(b) && i <= 4; i++ {
		n = n<<7 | int(b[i]&0x7F)
		if b[i]&0x80 == 0 {
			i++
			break
		}
	}
	if i+n > len(b) {
		n = len(b) - i // tolerate a descriptor longer than its box
	}
	if n < 0 {
		return 0, nil, false
	}
	return tag, b[i : i+n], true
}
