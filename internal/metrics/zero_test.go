package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/metrics"
)

// TestZeroShowsKnownSeries: a worker that has done nothing yet exports 0
// for the series of the kinds it serves, so a dashboard panel reads 0
// rather than "No data".
func TestZeroShowsKnownSeries(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	m.Zero(metrics.Known{Kinds: []string{"video"}, Statuses: []string{"succeeded", "failed"}, Actions: []string{"ack", "retry"}})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`sluice_jobs_total{kind="video",status="succeeded"} 0`,
		`sluice_jobs_total{kind="video",status="failed"} 0`,
		`sluice_job_retries_total{kind="video"} 0`,
		`sluice_jobs_inflight{kind="video"} 0`,
		`sluice_jobs_waiting{kind="video"} 0`,
		`sluice_messages_settled_total{action="retry",kind="video"} 0`,
		`sluice_artifact_bytes_total{kind="video"} 0`,
		`sluice_messages_orphaned_total{kind="video"} 0`,
		`sluice_container_delete_failures_total{final="true"} 0`,
		`sluice_job_duration_seconds_count{kind="video",status="succeeded"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
