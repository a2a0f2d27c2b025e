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

// TestJobPageSaysWhatPlatformStatusMeans: a compute job's page shows the
// platform's status code with what sluice reads it as, not the bare code.
func TestJobPageSaysWhatPlatformStatusMeans(t *testing.T) {
	t.Parallel()
	base, _, n := serve(t, token)
	ctx := testenv.Context(t, 30*time.Second)
	kv, err := n.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	st := state.NewStore(kv, "w1", nil)
	if _, err := st.Update(ctx, "hpc-1", func(r *state.Record) error {
		r.Kind, r.Status = "compute", state.StatusRunning
		r.Upstream = state.Upstream{ClusterID: "1001", JobID: "42", Status: "statR", State: "statQ"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/console/jobs/hpc-1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	for _, want := range []string{"statR <span class=\"muted\">(running)</span>", "statQ <span class=\"muted\">(queued)</span>"} {
		if !strings.Contains(page, want) {
			t.Errorf("job page lacks %s:\n%s", want, page)
		}
	}
}
