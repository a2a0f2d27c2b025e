package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
)

// liveEvent is what the stream sends for each event: enough for the
// script to update a row.
type liveEvent struct {
	JobID   string `json:"job_id"`
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Tenant  string `json:"tenant,omitempty"`
	Attempt int    `json:"attempt"`
	Time    string `json:"time"`
	Code    string `json:"code,omitempty"`
	// seq is the event's position on SLUICE_EVENTS, sent as its SSE id.
	seq uint64
}

// replayLimit bounds how far back the stream goes when it resumes: a page
// left open for a day (or a made-up position) gets at most this much
// history, never a day of events.
const replayLimit = 10 * time.Minute

// resumeAfter is where the stream resumes: after the last event the
// browser saw (the Last-Event-ID its EventSource sends when it
// reconnects), or else after the position of SLUICE_EVENTS the page was
// rendered at (?after=, from the page's data-after). ok is false when
// neither is given or valid: then the stream sends only new events.
func resumeAfter(r *http.Request) (seq uint64, ok bool) {
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if seq, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			return seq, true
		}
	}
	return 0, false
}

// stream sends the events on SLUICE_EVENTS as server-sent events, each
// with its sequence as its id, until the browser goes away, with a comment
// every 15s to keep proxies from closing an idle stream. It starts after
// resumeAfter's position, going back at most replayLimit (a position past
// the stream's end counts as its end), or with the new events when there
// is none.
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": sluice events\nretry: 2000\n\n")
	flusher.Flush()

	ctx := r.Context()
	var o jobclient.WatchOptions
	if seq, ok := resumeAfter(r); ok {
		// After 0 (a page rendered on an empty stream) is no position:
		// then Since alone replays from replayLimit ago.
		o.After, o.Since = seq, replayLimit
	}
	out := make(chan liveEvent, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.cfg.Client.Watch(ctx, o, func(we jobclient.WatchedEvent) error {
			if we.Err != nil {
				return nil
			}
			d := we.Event.Data
			le := liveEvent{JobID: d.JobID, Kind: d.Kind, Status: d.Status, Tenant: d.Tenant, Attempt: d.Attempt, Time: we.Event.Time, seq: we.Seq}
			if d.Error != nil {
				le.Code = d.Error.Code
			}
			select {
			case out <- le:
			case <-ctx.Done():
			}
			return nil
		})
	}()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case err := <-done:
			if err != nil {
				c.log.Debug().Err(err).Msg("console stream ended")
			}
			return
		case le := <-out:
			b, _ := json.Marshal(le)
			fmt.Fprintf(w, "id: %d\nevent: job\ndata: %s\n\n", le.seq, b)
			flusher.Flush()
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		}
	}
}
