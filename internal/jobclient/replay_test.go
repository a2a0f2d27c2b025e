package jobclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestReplayFollowsRetrysRules: a dead letter of a job that has not ended
// (a stray copy of a job a worker holds) or that succeeded is not replayed
// (without Force for the succeeded one and the one without a record), by
// id, by reason or all at once; a letter of a job that failed is.
func TestReplayFollowsRetrysRules(t *testing.T) {
	t.Parallel()
	n, ctx, kv := stateBucket(t)
	leave := func(id string, st state.Status) {
		_, err := state.NewStore(kv, "w", time.Now).UpdateNew(ctx, id, func(r *state.Record) error {
			*r = state.Record{JobID: id, Kind: "video", Status: st, Attempts: 1}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	leave("held", state.StatusRunning)
	leave("done", state.StatusSucceeded)
	failJob(ctx, t, n, "broke")
	for _, id := range []string{"held", "done", "broke", "unseen"} {
		m := nats.NewMsg(contract.DLQSubject("video"))
		m.Header.Set(contract.HeaderJobID, id)
		m.Header.Set(contract.HeaderError, "invalid_spec: a stray copy")
		m.Data = []byte(`{"id":"` + id + `","kind":"video","video":{"model":"m","input":{"prompt":"p"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`)
		if _, err := n.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	letters, err := jc.DeadLetters(ctx, jobclient.DLQFilter{Reason: "invalid_spec", WithData: true})
	if err != nil || len(letters) != 4 {
		t.Fatalf("letters = %+v, %v", letters, err)
	}
	for _, d := range letters {
		_, err := jc.Replay(ctx, d, jobclient.RetryOptions{})
		switch d.JobID {
		case "held":
			if !errors.Is(err, jobclient.ErrNotRetryable) || jobclient.NeedsForce(err) {
				t.Errorf("replay of a running job: %v, want a refusal Force does not lift", err)
			}
			if _, err := jc.Replay(ctx, d, jobclient.RetryOptions{Force: true}); !errors.Is(err, jobclient.ErrNotRetryable) {
				t.Errorf("forced replay of a running job: %v, want a refusal", err)
			}
		case "done":
			if !errors.Is(err, jobclient.ErrSucceeded) {
				t.Errorf("replay of a succeeded job: %v, want ErrSucceeded", err)
			}
		case "unseen":
			if !jobclient.NeedsForce(err) {
				t.Errorf("replay of a job without a record: %v, want a refusal Force lifts", err)
			}
		default:
			if err != nil {
				t.Errorf("replay of %s: %v", d.JobID, err)
			}
		}
	}
	left, err := jc.DeadLetters(ctx, jobclient.DLQFilter{})
	if err != nil || len(left) != 3 {
		t.Errorf("letters left = %+v, %v; want the three refused", left, err)
	}
}

// TestReplayWithoutRecordNeedsForce: a letter whose job has no record
// (it expired with SLUICE_STATE_TTL, or was purged) may be of a job that
// ran, even succeeded: sluice cannot tell, so the replay needs Force, as
// for any run that may pay twice.
func TestReplayWithoutRecordNeedsForce(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(contract.DLQSubject("video"))
	m.Header.Set(contract.HeaderJobID, "forgotten")
	m.Header.Set(contract.HeaderError, "too_many_deliveries: held by a worker")
	m.Data = []byte(`{"id":"forgotten","kind":"video","video":{"model":"m","input":{"prompt":"p"},"parameters":{"resolution":"768P","duration":5,"ratio":"16:9"}}}`)
	if _, err := n.JS.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	jc, err := jobclient.New(n.Conn, nil)
	if err != nil {
		t.Fatal(err)
	}
	letters, err := jc.DeadLetters(ctx, jobclient.DLQFilter{WithData: true})
	if err != nil || len(letters) != 1 {
		t.Fatalf("letters = %+v, %v", letters, err)
	}
	if _, err := jc.Replay(ctx, letters[0], jobclient.RetryOptions{}); !jobclient.NeedsForce(err) {
		t.Fatalf("replay of a letter without a record: %v, want a refusal Force lifts", err)
	}
	if _, err := jc.Replay(ctx, letters[0], jobclient.RetryOptions{Force: true}); err != nil {
		t.Fatalf("forced replay: %v", err)
	}
}
