package runner

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apiclient"
	"github.com/sluice-dev/sluice/internal/state"
)

// A compute poll writes the job's record only when it brings news, or
// when the record would otherwise come near its SLUICE_STATE_TTL: a job
// that runs for days keeps its record, and so its resume point.
func TestComputePollWritesOnlyNews(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	run := &Runner{cfg: Config{StateTTL: 8 * time.Hour, Now: func() time.Time { return now }}}
	zero, three := "0", "3"
	rec := &state.Record{Status: state.StatusRunning, UpdatedAt: now.Add(-time.Hour),
		Upstream: state.Upstream{Status: "R", State: "RUNNING"}}
	running := &apiclient.JobDetail{JobStatus: "R", JobInitAttr: map[string]string{"JobState": "RUNNING"}}
	for _, tc := range []struct {
		name    string
		status  state.Status
		detail  *apiclient.JobDetail
		updated time.Time
		exit    *string
		want    bool
	}{
		{"nothing new", state.StatusRunning, running, now.Add(-time.Hour), nil, false},
		{"another status", state.StatusCollecting, running, now.Add(-time.Hour), nil, true},
		{"another scheduler status", state.StatusRunning, &apiclient.JobDetail{JobStatus: "E", JobInitAttr: running.JobInitAttr}, now.Add(-time.Hour), nil, true},
		{"another state", state.StatusRunning, &apiclient.JobDetail{JobStatus: "R", JobInitAttr: map[string]string{"JobState": "EXITING"}}, now.Add(-time.Hour), nil, true},
		{"an exit code", state.StatusRunning, &apiclient.JobDetail{JobStatus: "R", ExitCode: &zero, JobInitAttr: running.JobInitAttr}, now.Add(-time.Hour), nil, true},
		{"another exit code", state.StatusRunning, &apiclient.JobDetail{JobStatus: "R", ExitCode: &zero, JobInitAttr: running.JobInitAttr}, now.Add(-time.Hour), &three, true},
		{"the same exit code", state.StatusRunning, &apiclient.JobDetail{JobStatus: "R", ExitCode: &zero, JobInitAttr: running.JobInitAttr}, now.Add(-time.Hour), &zero, false},
		{"record a quarter of its TTL old", state.StatusRunning, running, now.Add(-2*time.Hour - time.Second), nil, true},
	} {
		last := *rec
		last.UpdatedAt, last.Upstream.ExitCode = tc.updated, tc.exit
		if got := run.pollNews(&job{rec: &last}, tc.status, tc.detail); got != tc.want {
			t.Errorf("%s: pollNews = %v, want %v", tc.name, got, tc.want)
		}
	}
}
