package mediaprobe

import (
	"bytes"
	"encoding/binary"
)

// Kind is the class of media an input role takes.
type Kind string

// The kinds of the media API's input limits table.
const (
	KindImage Kind = "image"
	KindVideo Kind = "video"
	KindAudio Kind = "audio"
)

// Format is a file format recognised by its magic bytes.
type Format string

// Formats the media API accepts.
const (
	FormatJPEG Format = "JPEG"
	FormatPNG  Format = "PNG"
	FormatWEBP Format = "WEBP"
	FormatHEIF Format = "HEIC/HEIF"
	FormatMP4  Format = "MP4"
	FormatMOV  Format = "MOV"
	FormatWAV  Format = "WAV"
	FormatMP3  Format = "MP3"
)

// Formats recognised only to name them in an error.
const (
	FormatGIF      Format = "GIF"
	FormatBMP      Format = "BMP"
	FormatTIFF     Format = "TIFF"
	FormatAVIF     Format = "AVIF"
	FormatMatroska Format = "Matroska/WebM"
	FormatOgg      Format = "Ogg"
	FormatFLAC     Format = "FLAC"
	FormatAVI      Format = "AVI"
	FormatADTS     Format = "AAC (ADTS)"
	FormatPDF      Format = "PDF"
	FormatUnknown  Format = ""
)

// Kind returns the kind of media f is, or "" for a format the media API
// does not accept.
func (f Format) Kind() Kind {
	switch f {
	case FormatJPEG, FormatPNG, FormatWEBP, FormatHEIF:
		return KindImage
	case FormatMP4, FormatMOV:
		return KindVideo
	case FormatWAV, FormatMP3:
		return KindAudio
	}
	return ""
}

// sniffLen is how many leading bytes Sniff looks at.
const sniffLen = 64

// heifBrands are ftyp brands of HEIF still images (ISO/IEC 23008-12).
var heifBrands = []string{"heic", "heix", "heim", "heis", "hevc", "hevx", "mif1", "msf1", "mif2"}

// Sniff returns the format of a file whose first bytes are head (at least
// the first 64 when the file has them).
func Sniff(head []byte) Format {
	switch {
	case bytes.HasPrefix(head, []byte{0xFF, 0xD8, 0xFF}):
		return FormatJPEG
	case bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n")):
		return FormatPNG
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WEBP":
		return FormatWEBP
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "WAVE":
		return FormatWAV
	case len(head) >= 12 && string(head[:4]) == "RIFF" && string(head[8:12]) == "AVI ":
		return FormatAVI
	case bytes.HasPrefix(head, []byte("GIF87a")), bytes.HasPrefix(head, []byte("GIF89a")):
		return FormatGIF
	case bytes.HasPrefix(head, []byte("BM")) && len(head) >= 14 && binary.LittleEndian.Uint32(head[6:10]) == 0:
		return FormatBMP
	case bytes.HasPrefix(head, []byte("II*\x00")), bytes.HasPrefix(head, []byte("MM\x00*")):
		return FormatTIFF
	case bytes.HasPrefix(head, []byte{0x1A, 0x45, 0xDF, 0xA3}):
		return FormatMatroska
	case bytes.HasPrefix(head, []byte("OggS")):
		return FormatOgg
	case bytes.HasPrefix(head, []byte("fLaC")):
		return FormatFLAC
	case bytes.HasPrefix(head, []byte("%PDF-")):
		return FormatPDF
	case bytes.HasPrefix(head, []byte("ID3")):
		return FormatMP3
	case len(head) >= 12 && string(head[4:8]) == "ftyp":
		return isoFormat(head)
	case len(head) >= 8 && quickTimeAtom(string(head[4:8])):
		// Old QuickTime files start with a movie atom, no ftyp.
		return FormatMOV
	}
	if _, ok := parseFrameHeader(head); ok {
		return FormatMP3
	}
	if len(head) >= 2 && head[0] == 0xFF && head[1]&0xF6 == 0xF0 {
		return FormatADTS
	}
	return FormatUnknown
}

// isoFormat tells an ISO base media file by its ftyp brands.
func isoFormat(head []byte) Format {
	size := int(binary.BigEndian.Uint32(head[:4]))
	end := min(max(size, 12), len(head))
	major := string(head[8:12])
	brands := []string{major}
	for o := 16; o+4 <= end; o += 4 {
		brands = append(brands, string(head[o:o+4]))
	}
	heic := []string{"heic", "heix", "heim", "heis", "hevc", "hevx"}
	avif := []string{"avif", "avis"}
	switch {
	case containsAny(brands[:1], avif):
		return FormatAVIF
	case major == "qt  ":
		return FormatMOV
	case containsAny(brands, heic):
		return FormatHEIF
	case containsAny(brands, avif):
		return FormatAVIF
	case containsAny(brands[:1], heifBrands):
		return FormatHEIF
	}
	return FormatMP4
}

func containsAny(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}

// quickTimeAtom reports whether t is a top-level atom a QuickTime movie
// without ftyp starts with.
func quickTimeAtom(t string) bool {
	switch t {
	case "moov", "mdat", "wide", "free", "skip", "pnot":
		return true
	}
	return false
}

// formatFiles are the file extension and media type of each accepted
// format.
var formatFiles = map[Format][2]string{
	FormatJPEG: {".jpg", "image/jpeg"},
	FormatPNG:  {".png", "image/png"},
	FormatWEBP: {".webp", "image/webp"},
	FormatHEIF: {".heic", "image/heic"},
	FormatMP4:  {".mp4", "video/mp4"},
	FormatMOV:  {".mov", "video/quicktime"},
	FormatWAV:  {".wav", "audio/wav"},
	FormatMP3:  {".mp3", "audio/mpeg"},
}

// Ext returns the usual file extension of an accepted format (".png"),
// or "".
func (f Format) Ext() string { return formatFiles[f][0] }

// MediaType returns the media type of an accepted format ("image/png"),
// or "application/octet-stream".
func (f Format) MediaType() string {
	if t := formatFiles[f][1]; t != "" {
		return t
	}
	return "application/octet-stream"
}
