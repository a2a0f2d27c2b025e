package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// errStreamDone ends the watch once the terminal event is sent.
var errStreamDone = errors.New("terminal event sent")

// events streams job id's events as Server-Sent Events: each event's
// CloudEvents JSON as data, its status as the SSE event name and its id
// as the SSE id, from the job's first event on (or after Last-Event-ID),
// and ends the stream after the terminal one. A stream that starts after
// the job ended replays its events and ends at once.
func (s *Server) events(w http.ResponseWriter, r *http.Request, key *apikeys.Key) {
	job := s.ownedOrAnswer(w, r, key)
	if job == nil {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.unavailable(w, r, errors.New("streaming is not supported by this connection"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": sluice events of "+job.ID+"\n\n")
	flusher.Flush()

	ctx := r.Context()
	out := make(chan jobclient.WatchedEvent, 16)
	done := make(chan error, 1)
	go func() {
		done <- s.watch(ctx, job, r.Header.Get("Last-Event-ID"), out)
		close(out)
	}()
	tick := time.NewTicker(s.cfg.KeepAlive)
	defer tick.Stop()
	for {
		select {
		case we, open := <-out:
			if !open {
				if err := <-done; err != nil && !errors.Is(err, errStreamDone) && ctx.Err() == nil {
					fmt.Fprintf(w, "event: error\ndata: {\"code\":%q}\n\n", codeUnavailable)
					flusher.Flush()
				}
				return
			}
			fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", we.Event.ID, we.Event.Data.Status, we.Raw)
			flusher.Flush()
		case <-tick.C:
			if s.revoked(ctx, key) {
				fmt.Fprintf(w, "event: error\ndata: {\"code\":%q}\n\n", codeUnauthorized)
				flusher.Flush()
				return
			}
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		case <-ctx.Done():
			return
		}
	}
}

// revoked reports whether key was revoked or deleted since the stream
// began, so that a revoked key's open streams end within a keep-alive
// too. A store that cannot be read keeps the stream going.
func (s *Server) revoked(ctx context.Context, key *apikeys.Key) bool {
	k, err := s.cfg.Keys.Get(ctx, key.ID)
	if errors.Is(err, apikeys.ErrNoSuchKey) {
		return true
	}
	return err == nil && k.Revoked != nil
}

// watch sends job's events to out from its first (or after the event
// resumed, an event id of this job that a reconnecting client sent) and
// returns errStreamDone after the terminal one.
func (s *Server) watch(ctx context.Context, job *jobclient.Job, resumed string, out chan<- jobclient.WatchedEvent) error {
	// Replay from the job's creation (less the allowed skew between
	// clocks); a job without a creation time is looked for a day back.
	since := 24 * time.Hour
	if job.CreatedAt != nil {
		since = s.cfg.Now().Sub(*job.CreatedAt) + jobclient.SkewAllowance
	}
	kind := jobspec.Kind(job.Kind)
	if !kind.Valid() {
		kind = "" // a job of a subject no worker serves: its event is of kind unknown
	}
	if !strings.HasPrefix(resumed, job.ID+".") {
		resumed = ""
	}
	return s.cfg.Client.Watch(ctx, jobclient.WatchOptions{Kind: kind, Since: max(since, time.Second)},
		func(we jobclient.WatchedEvent) error {
			if we.Err != nil || we.Event.Data.JobID != job.ID {
				return nil
			}
			// Events arrive in stream order: skip up to the one the
			// client saw last.
			skip := resumed != ""
			if we.Event.ID == resumed {
				resumed = ""
			}
			if !skip {
				select {
				case out <- we:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if state.Status(we.Event.Data.Status).Terminal() {
				return errStreamDone
			}
			return nil
		})
}
