package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/internal/jobclient"
)

// liveEvent is what the stream sends for each event: enough for the
// script to update a row.
type liveEvent struct {
	JobID   string `json:"job_id"`
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Attempt int    `json:"attempt"`
	Time    string `json:"time"`
	Code    string `json:"code,omitempty"`
}

// stream sends every new event on SLUICE_EVENTS as a server-sent event
// until the browser goes away, with a comment every 15s to keep proxies
// from closing an idle stream.
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
	out := make(chan liveEvent, 64)
	done := make(chan error, 1)
	go func() {
		done <- c.cfg.Client.Watch(ctx, jobclient.WatchOptions{}, func(we jobclient.WatchedEvent) error {
			if we.Err != nil {
				return nil
			}
			d := we.Event.Data
			le := liveEvent{JobID: d.JobID, Kind: d.Kind, Status: d.Status, Attempt: d.Attempt, Time: we.Event.Time}
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
			fmt.Fprintf(w, "event: job\ndata: %s\n\n", b)
			flusher.Flush()
		case <-keep.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		}
	}
}
