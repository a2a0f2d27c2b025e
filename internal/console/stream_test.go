package console_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// sent is one server-sent event of the stream.
type sent struct {
	ID    string
	JobID string `json:"job_id"`
}

// follow opens the stream at base+query, sending lastID as Last-Event-ID
// when set, and returns its job events as they come.
func follow(t *testing.T, base, query, lastID string) <-chan sent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/console/stream"+query, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream%s: %d %s", query, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sent, 16)
	go func() {
		defer resp.Body.Close()
		var ev sent
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			field, value, _ := strings.Cut(sc.Text(), ": ")
			switch field {
			case "id":
				ev.ID = value
			case "data":
				if json.Unmarshal([]byte(value), &ev) != nil {
					ev.JobID = "not json: " + value
				}
			case "":
				if ev.JobID != "" {
					out <- ev
				}
				ev = sent{}
			}
		}
	}()
	return out
}

var afterAttr = regexp.MustCompile(`<body [^>]*data-after="(\d+)"`)

// The live stream starts where the page was rendered: an event published
// after the page but before its script connects still comes (CI's
// TestConsoleInBrowser waited in vain for a cancel published in between);
// a reconnect resumes after the last event seen; a bad or future mark
// falls back to the new events.
func TestStreamStartsAtThePage(t *testing.T) {
	t.Parallel()
	base, _, n := serve(t, "")
	ctx := testenv.Context(t, time.Minute)
	pub := events.NewPublisher(n.JS)
	publish := func(id string) {
		t.Helper()
		if err := pub.Publish(ctx, events.FromRecord(&state.Record{JobID: id, Kind: "video"}, state.StatusRunning, time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	// next waits for the stream's next event; with fresh set, it
	// publishes a new one (job fresh-N) every 100ms while it waits, for a
	// stream that sends only new events.
	next := func(evs <-chan sent, fresh string) sent {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for i := 0; ; i++ {
			select {
			case ev := <-evs:
				return ev
			case <-deadline:
				t.Fatal("no event within 30s")
			case <-time.After(100 * time.Millisecond):
				if fresh != "" {
					publish(fmt.Sprintf("%s-%d", fresh, i))
				}
			}
		}
	}

	publish("before-page")
	var mark string
	for _, path := range []string{"", "dlq", "jobs/before-page"} {
		resp, err := http.Get(base + "/console/" + path)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := afterAttr.FindSubmatch(page)
		if m == nil {
			t.Errorf("page /console/%s does not carry its position on SLUICE_EVENTS (data-after)", path)
			continue
		}
		mark = cmp.Or(mark, string(m[1]))
	}

	publish("between") // after the page, before its script connects
	ev := next(follow(t, base, "?after="+mark, ""), "")
	if ev.JobID != "between" || ev.ID == "" {
		t.Fatalf("stream after the page's mark %q: first %+v, want job between with an id", mark, ev)
	}

	// A reconnect resumes after the last event the browser saw.
	publish("while-away")
	if ev := next(follow(t, base, "?after="+mark, ev.ID), ""); ev.JobID != "while-away" {
		t.Errorf("stream resumed after id %s: first %+v, want job while-away", ev.ID, ev)
	}

	// A bad, negative or future mark: only new events, and they come.
	for i, c := range []struct{ query, lastID string }{
		{"?after=soon", ""}, {"?after=-1", ""}, {"?after=99999999999", ""}, {"", "x"}, {"?after=1e3", "999999999999"},
	} {
		fresh := fmt.Sprintf("fresh%d", i)
		if ev := next(follow(t, base, c.query, c.lastID), fresh); !strings.HasPrefix(ev.JobID, fresh+"-") {
			t.Errorf("stream%s with Last-Event-ID %q: first %+v, want a new event", c.query, c.lastID, ev)
		}
	}
}
