package chaos

import (
	"bytes"
	"testing"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/consumer"
	"github.com/sluice-dev/sluice/internal/runner"
)

// The harness explains a second submission only by a resubmission the
// runner logged for that job; anything else in the logs does not count.
func TestCountResubmits(t *testing.T) {
	t.Parallel()
	var w0, w1 bytes.Buffer
	log0, log1 := zerolog.New(&w0), zerolog.New(&w1)
	log0.Warn().Str("job_id", "a").Int("submits", 1).Msg(runner.LogSubmittingAgain)
	log0.Info().Str("job_id", "a").Msg("task submitted")
	w0.WriteString("{not json\n")
	log1.Warn().Str("job_id", "a").Int("submits", 2).Msg(runner.LogSubmittingAgain)
	log1.Warn().Str("job_id", "b").Msg(runner.LogSubmittingAgain)
	log1.Warn().Str("job_id", "c").Msg("transient failure; job will be redelivered")
	log0.Warn().Str("job_id", "o").Uint64("seq", 7).Msg(consumer.LogOrphan)
	log1.Warn().Str("job_id", "o").Uint64("seq", 7).Msg(consumer.LogOrphan)
	got := countLogged(map[string][]byte{"worker-0.log": w0.Bytes(), "worker-1.log": w1.Bytes()}, runner.LogSubmittingAgain)
	if got["a"] != 2 || got["b"] != 1 || got["c"] != 0 || len(got) != 2 {
		t.Errorf("resubmissions = %v, want a:2 b:1", got)
	}
	// Each worker logs an orphan it hands over; the report counts jobs.
	if got := countLogged(map[string][]byte{"worker-0.log": w0.Bytes(), "worker-1.log": w1.Bytes()}, consumer.LogOrphan); got["o"] != 2 || len(got) != 1 {
		t.Errorf("orphans = %v, want o:2", got)
	}
}
