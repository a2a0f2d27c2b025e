package artifacts

import (
	"mime"
	"path"
	"strings"
)

// byExtension maps lower-case file extensions to the Content-Type an
// artifact gets when its source did not name a real one.
var byExtension = map[string]string{
	".mp4":  "video/mp4",
	".mov":  "video/quicktime",
	".webm": "video/webm",
	".mp3":  "audio/mpeg",
	".wav":  "audio/wav",
	".m4a":  "audio/mp4",
	".aac":  "audio/aac",
	".flac": "audio/flac",
	".ogg":  "audio/ogg",
	".opus": "audio/opus",
	// Raw PCM has no registered media type that fits: audio/L16 means
	// big-endian samples and requires rate and channel parameters that the
	// name does not tell, so .pcm stays application/octet-stream.
	".pcm":  "application/octet-stream",
	".png":  "image/png",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".webp": "image/webp",
	".gif":  "image/gif",
	".json": "application/json",
	".csv":  "text/csv",
	".txt":  "text/plain",
	".out":  "text/plain",
	".err":  "text/plain",
	".log":  "text/plain",
}

// genericTypes are Content-Types that say nothing about the bytes.
var genericTypes = map[string]bool{
	"application/octet-stream": true,
	"binary/octet-stream":      true,
	"application/binary":       true,
	"application/unknown":      true,
}

// ContentType returns the Content-Type of an artifact named name whose
// source answered with header: the header when it is a well-formed, specific
// media type (normalised, parameters kept), otherwise the type of name's
// extension (.mp4 video/mp4, .mov video/quicktime, .mp3 audio/mpeg, .wav
// audio/wav, .txt/.out/.err/.log text/plain, ...), otherwise
// application/octet-stream.
func ContentType(header, name string) string {
	if mt, params, err := mime.ParseMediaType(header); err == nil && !genericTypes[mt] && strings.Contains(mt, "/") {
		if s := mime.FormatMediaType(mt, params); s != "" {
			return s
		}
	}
	if ct, ok := byExtension[strings.ToLower(path.Ext(name))]; ok {
		return ct
	}
	return "application/octet-stream"
}
