package worker_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// A job that ended dead-lettered is dead-lettered once, by the message
// that ended it: a copy of its spec published again (or a swept orphan of
// it) is acknowledged, not dead-lettered again, so that each letter
// stands for one job and a replay of them all queues one retry.
func TestLaterMessageOfDeadLetteredJobAddsNoLetter(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	ctx := testenv.Context(t, 20*time.Second)
	if err := contract.Ensure(ctx, b.nats.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	own := b.publish(t, "video", "dead-1", videoSpec("dead-1", "never sent"))
	now := time.Now().UTC()
	if _, err := state.NewStore(b.kv(t), "crashed-worker", nil).Update(ctx, "dead-1", func(r *state.Record) error {
		r.Kind, r.Status, r.Attempts, r.FinishedAt, r.TerminalSeq = "video", state.StatusFailed, 1, &now, own
		r.Error = &state.Error{Code: "upstream_failed", Message: "the task failed", Stage: state.StagePoll}
		r.DeadLetter = true
		ev, err := json.Marshal(events.FromRecord(r, r.Status, now))
		r.TerminalEvent = ev
		return err
	}); err != nil {
		t.Fatal(err)
	}
	b.start(t)
	b.settled(t, 20*time.Second)
	if n := len(b.deadLetters(t)); n != 1 {
		t.Fatalf("%d dead letters after the message that ended the job, want 1", n)
	}
	b.publish(t, "video", "dead-1-again", videoSpec("dead-1", "never sent"))
	b.publish(t, "video", "dead-1-third", videoSpec("dead-1", "never sent"))
	b.settled(t, 20*time.Second)
	if n := len(b.deadLetters(t)); n != 1 {
		t.Errorf("%d dead letters after two later messages of the job, want 1", n)
	}
	if n := b.media.SubmitCount("never sent"); n != 0 {
		t.Errorf("a finished job was submitted %d times", n)
	}
}
