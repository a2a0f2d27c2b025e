#!/usr/bin/env bash
# Regenerates the media fixtures of internal/mediaprobe/testdata with
# Debian's ffmpeg and libheif-examples (apt-get install ffmpeg
# libheif-examples). The files are committed so that `go test` needs
# neither; .ci/run runs this script with -check, which regenerates them
# into a temporary directory and probes them with the same tests
# (MEDIAPROBE_FIXTURES points the tests there).
set -euo pipefail
out="${1:-$(dirname "$0")}"
mkdir -p "$out"
cd "$out"
ff() { ffmpeg -hide_banner -loglevel error -y "$@"; }
# Images show a test pattern; videos a plain colour, which compresses to
# almost nothing while every frame stays a real frame.
src() { echo "testsrc2=s=$1:r=$2:d=$3"; }
plain() { echo "color=c=0x336699:s=$1:r=$2:d=$3"; }
sine() { echo "sine=f=440:r=$1:d=$2"; }
x264=(-c:v libx264 -preset ultrafast -crf 45 -pix_fmt yuv420p -g 250 -bf 0)

# Images.
ff -f lavfi -i "$(src 384x256 1 1)" -frames:v 1 image-384x256.png
ff -f lavfi -i "$(src 384x256 1 1)" -frames:v 1 -q:v 10 image-384x256.jpg
ff -f lavfi -i "$(src 200x180 1 1)" -frames:v 1 -q:v 10 image-200x180.jpg
ff -f lavfi -i "$(src 384x256 1 1)" -frames:v 1 -c:v libwebp -quality 20 image-384x256.webp
ff -f lavfi -i "$(src 384x256 1 1)" -frames:v 1 image-384x256.gif
heif-enc -q 20 -o image-384x256.heic image-384x256.png >/dev/null
cp image-384x256.png image-disguised.jpg   # a PNG under a JPEG name
cp image-384x256.gif image-disguised.png   # a GIF under a PNG name

# Videos: 256x256 unless the name says otherwise.
ff -f lavfi -i "$(plain 256x256 30 2)" -f lavfi -i "$(sine 44100 2)" "${x264[@]}" -c:a aac -b:a 32k -shortest -movflags +faststart video-h264-aac-2s.mp4
ff -f lavfi -i "$(plain 256x256 30 1.9)" "${x264[@]}" -movflags +faststart video-h264-1.9s.mp4
ff -f lavfi -i "$(plain 256x256 30 15)" "${x264[@]}" -movflags +faststart video-h264-15s.mp4
ff -f lavfi -i "$(plain 256x256 30 15.1)" "${x264[@]}" -movflags +faststart video-h264-15.1s.mp4
ff -f lavfi -i "$(plain 256x256 30 13)" "${x264[@]}" -movflags +faststart video-h264-13s.mp4
ff -f lavfi -i "$(plain 256x256 30 13.1)" "${x264[@]}" -movflags +faststart video-h264-13.1s.mp4
ff -f lavfi -i "$(plain 256x256 24000/1001 3)" "${x264[@]}" -movflags +faststart video-23.976fps.mp4
ff -f lavfi -i "$(plain 256x256 23.9 3)" "${x264[@]}" -movflags +faststart video-23.9fps.mp4
ff -f lavfi -i "$(plain 256x256 60 3)" "${x264[@]}" -movflags +faststart video-60fps.mp4
ff -f lavfi -i "$(plain 256x256 61 3)" "${x264[@]}" -movflags +faststart video-61fps.mp4
ff -f lavfi -i "$(plain 256x256 30 2)" -vf scale=255:256 -c:v libx264 -preset ultrafast -crf 45 -pix_fmt yuv444p -movflags +faststart video-255x256.mp4
# moov after mdat: what ffmpeg writes without +faststart.
ff -f lavfi -i "$(plain 256x256 30 3)" -f lavfi -i "$(sine 44100 3)" "${x264[@]}" -c:a aac -b:a 32k -shortest video-moov-at-end.mp4
ff -f lavfi -i "$(plain 256x256 30 3)" -f lavfi -i "$(sine 44100 3)" -c:v libx265 -preset ultrafast -crf 45 -x265-params log-level=error -tag:v hvc1 -c:a libmp3lame -b:a 32k -shortest video-h265-mp3.mov
ff -f lavfi -i "$(plain 256x256 30 3)" -c:v mpeg4 -q:v 31 video-mpeg4.mp4
ff -f lavfi -i "$(plain 256x256 30 3)" -f lavfi -i "$(sine 48000 3)" "${x264[@]}" -c:a ac3 -b:a 64k -shortest video-h264-ac3.mp4

# Audio.
ff -f lavfi -i "$(sine 8000 2)" -ac 1 -c:a pcm_s16le audio-2s.wav
ff -f lavfi -i "$(sine 8000 1.9)" -ac 1 -c:a pcm_s16le audio-1.9s.wav
ff -f lavfi -i "$(sine 22050 15)" -ac 1 -c:a libmp3lame -b:a 16k audio-15s.mp3
ff -f lavfi -i "$(sine 22050 15.1)" -ac 1 -c:a libmp3lame -b:a 16k audio-15.1s.mp3
ff -f lavfi -i "$(sine 22050 3)" -ac 1 -c:a libmp3lame -b:a 16k -write_xing 0 -id3v2_version 0 audio-3s-cbr-no-xing.mp3
ff -f lavfi -i "$(sine 22050 3)" -ac 1 -c:a libopus -b:a 16k audio-3s.ogg
