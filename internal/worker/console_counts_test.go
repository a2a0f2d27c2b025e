package worker_test

import (
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/state"
)

// TestConsoleCountsJobs: the console's overview counts jobs by their
// current status: a finished video is one succeeded job, not a submitted,
// a running and a succeeded one.
func TestConsoleCountsJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	b.start(t)
	b.publish(t, "video", "count-ok", videoSpec("count-ok", "a paper boat"))
	if ev := b.await(t, "count-ok", time.Minute); ev.Data.Status != "succeeded" {
		t.Fatalf("count-ok ended %s", ev.Data.Status)
	}
	b.publish(t, "video", "count-long", videoSpec("count-long", "a long one [sim:duration=5m]"))
	b.awaitStatus(t, "count-long", state.StatusRunning, 30*time.Second)

	resp, err := http.Get("http://" + b.ep.HTTPAddr + "/console/overview")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("overview: %d %v\n%s", resp.StatusCode, err, body)
	}
	for status, want := range map[string]string{"submitted": "0", "running": "1", "succeeded": "1", "failed": "0", "cancelled": "0"} {
		for _, since := range []string{"1h0m0s", "24h0m0s"} {
			cell := regexp.MustCompile(`href="/console/\?kind=video&amp;status=` + status + `&amp;since=` + since + `">(\d+)</a>`).FindSubmatch(body)
			if cell == nil || string(cell[1]) != want {
				t.Errorf("video %s over %s: %q, want %s jobs", status, since, cell, want)
			}
		}
	}
	if !regexp.MustCompile(`jobs by current status`).Match(body) {
		t.Errorf("the counts do not say what they count:\n%s", body)
	}
}
