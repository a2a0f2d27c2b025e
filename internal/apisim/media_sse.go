package apisim

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxFrameAudio bounds the audio bytes of one stream frame.
const maxFrameAudio = 1 << 20

// streamSpeech answers a streamed synthesis: d.frames processing frames
// (more when the audio is over d.frames MiB),
// each a base64 data URI holding the next slice of
// ResultBytes(request_id, 0, d.size), then a succeeded frame with usage.
// [sim:fail] sends one audio frame and then a failed frame; [sim:sse-cut]
// and [sim:sse-abort] stop after half the frames.
func (m *Media) streamSpeech(w http.ResponseWriter, r *http.Request, text string, d directives) {
	requestID := m.nextID("req")
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	n := 0
	send := func(frame map[string]any) bool {
		b, err := json.Marshal(frame)
		if err != nil {
			return false
		}
		n++
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "id:%d\nevent:result\n:HTTP_STATUS/200\ndata:%s\n\n", n, b)
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}

	_, mediaType := (&simTask{speech: true, d: d}).ext()
	audio := newResultReader(requestID, 0, d.size)
	// Keep each increment at most maxFrameAudio bytes, so big audio
	// still fits a client's line limit.
	frames := int(max(int64(d.frames), (d.size+maxFrameAudio-1)/maxFrameAudio))
	stopAfter := frames
	if d.sseCut || d.sseAbort || d.sseStall {
		stopAfter = (frames + 1) / 2
	}
	if d.fail {
		stopAfter = 1
	}
	for i := range stopAfter {
		if i > 0 && d.frameGap > 0 {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(d.frameGap):
			}
		}
		chunk := d.size/int64(frames) + boolInt(int64(i) < d.size%int64(frames))
		b := make([]byte, chunk)
		if _, err := io.ReadFull(audio, b); err != nil {
			return
		}
		uri := "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(b)
		if !send(map[string]any{
			"request_id": requestID,
			"output":     map[string]any{"task_status": "processing", "results": []string{uri}},
		}) {
			return
		}
	}
	switch {
	case d.fail:
		send(map[string]any{
			"request_id": requestID,
			"output": map[string]any{
				"task_status":   "failed",
				"error_code":    d.failCode,
				"error_message": "simulated failure of the synthesis",
			},
		})
	case d.sseAbort:
		panic(http.ErrAbortHandler)
	case d.sseCut:
		// The stream just ends, without its final frame.
	case d.sseStall:
		// Silent until the client leaves (or a minute, so that a client
		// without a stall check cannot hold the server for ever).
		// "streams:stalled" counts the stalled streams still open.
		m.counters.Add("streams:stalled", 1)
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		m.counters.Add("streams:stalled", -1)
	default:
		send(map[string]any{
			"request_id": requestID,
			"output":     map[string]any{"task_status": "succeeded"},
			"usage":      speechUsage(text, audioSeconds(text), false),
		})
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
