// Package mediaprobe reads what the media API's input limits are about
// (spec/media-api.md 2.4 and 8) from a file's own bytes: its format by
// magic bytes (never by name or declared type), its size, the width and
// height of an image or a video, and the duration, frame rate and codecs
// of a video or an audio clip. It parses over an io.ReaderAt and asks only
// for the bytes a format needs (an image header, the MP4 moov box wherever
// it sits, a WAV's chunk headers, an MP3's first frames), so a caller that
// fetches ranges over the network reads a small part of a large file. It
// does no I/O of its own and no cgo; every length read from a file is
// bounded before it is used, so arbitrary bytes never panic or hang.
//
// Check compares what Probe found with the limits of one media kind, and
// Totals adds up the clip durations per kind.
//
// Assumptions where the upstream document is silent:
//
//   - MB is 1024×1024 bytes: an image may have 31,457,280 bytes, a video
//     52,428,800, an audio clip 15,728,640.
//   - Width and height are the stored picture's (JPEG SOF, PNG IHDR, WEBP
//     VP8/VP8L/VP8X, the HEIF primary item's ispe, the MP4 visual sample
//     entry). Rotation metadata (EXIF orientation, HEIF irot, the MP4 track
//     matrix) is not applied: the limits hold for width and height alike
//     and the aspect ratio range [0.4, 2.5] is its own inverse, so a
//     quarter turn cannot change the verdict.
//   - Aspect ratio is width / height.
//   - A video's duration is its first video track's (media header
//     duration over its timescale; the sum of its sample durations when the
//     header has none); edit lists and a longer audio track are ignored.
//     A fragmented MP4 whose moov holds no samples is refused as unparseable.
//   - Frame rate is the video track's sample count over its duration, so
//     a variable frame rate clip is measured by its average. Durations are
//     compared in whole milliseconds and frame rates to three decimals,
//     so 24000/1001 fps (23.976...) passes the 23.976 bound.
//   - Codecs are read from the sample entries: avc1/avc3 are H.264,
//     hvc1/hev1 are H.265; mp4a is AAC when its esds names MPEG-4 or MPEG-2
//     AAC (or has no esds), MP3 when it names MPEG-1/2 layer 3; .mp3 is MP3.
//     Every audio track must be AAC or MP3; a video needs no audio track.
//   - An MP3's duration comes from its Xing/Info or VBRI header, else from
//     its size and the first frame's bit rate (constant bit rate).
//   - A WAV's duration is its data chunk's length over the byte rate of
//     its fmt chunk.
package mediaprobe
