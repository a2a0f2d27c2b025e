package console_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestStuckJobsShown: a job a worker's watchdog marked stuck at its
// current step is listed by the stuck filter, with its badge, and its page
// says where it is stuck and since when; a job never marked is not listed.
func TestStuckJobsShown(t *testing.T) {
	t.Parallel()
	base, _, n := serve(t, token)
	ctx := testenv.Context(t, 30*time.Second)
	kv, err := n.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewStore(kv, "w1", nil)
	since := time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC)
	for _, id := range []string{"held-for-ever", "fine-job"} {
		if _, err := st.Update(ctx, id, func(r *state.Record) error {
			r.Kind, r.Status = "video", state.StatusReceived
			if id == "held-for-ever" {
				r.Stuck = &state.StuckMark{Step: state.StatusReceived, Since: since, At: since.Add(time.Hour), Worker: "w1"}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	list := get("/console/?stuck=1")
	if !strings.Contains(list, `data-id="held-for-ever"`) || strings.Contains(list, `data-id="fine-job"`) || !strings.Contains(list, `class="badge stuck"`) {
		t.Errorf("stuck list does not show exactly the stuck job with its badge:\n%s", list)
	}
	page := get("/console/jobs/held-for-ever")
	if !strings.Contains(page, "stuck at <strong>received</strong> since") || !strings.Contains(page, "2026-11-29T03:00:00Z") {
		t.Errorf("job page does not say where the job is stuck:\n%s", page)
	}
}
