package jobqueue_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobqueue"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func publish(tb testing.TB, n *testenv.NATS, subject, msgID, body string) uint64 {
	tb.Helper()
	m := nats.NewMsg(subject)
	m.Data = []byte(body)
	if msgID != "" {
		m.Header.Set(contract.HeaderMsgID, msgID)
	}
	ack, err := n.JS.PublishMsg(testenv.Context(tb, 10*time.Second), m)
	if err != nil {
		tb.Fatal(err)
	}
	return ack.Sequence
}

func TestFind(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if _, err := jobqueue.Find(ctx, n.JS, "a-1"); !errors.Is(err, jobqueue.ErrNotWaiting) {
		t.Fatalf("without a stream: %v", err)
	}
	if err := contract.EnsureJobsStream(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	publish(t, n, "sluice.jobs.video", "a-1", `{"id":"a-1","kind":"video"}`)
	publish(t, n, "sluice.jobs.speech", "", `{"id":"b-2","kind":"speech"}`)
	seq := publish(t, n, "sluice.jobs.compute", "", `not json`)
	publish(t, n, "sluice.jobs.foo", "d-4", `{"kind":"video"}`)
	publish(t, n, "sluice.jobs.video", "header-id", `{"id":"spec-id","kind":"video"}`)

	for id, want := range map[string]string{
		"a-1": "video sluice.jobs.video", "b-2": "speech sluice.jobs.speech",
		fmt.Sprintf("js-%d", seq): "compute sluice.jobs.compute", "d-4": "video sluice.jobs.foo",
		"spec-id": "video sluice.jobs.video",
	} {
		w, err := jobqueue.Find(ctx, n.JS, id)
		if err != nil {
			t.Errorf("Find(%s): %v", id, err)
			continue
		}
		if got := w.Kind + " " + w.Subject; got != want || w.JobID != id || w.Seq == 0 || w.Published.IsZero() {
			t.Errorf("Find(%s) = %+v, want %s", id, w, want)
		}
	}
	// The spec's id wins over the header, as in the worker; unknown ids
	// and a js- id of another job are not waiting.
	for _, id := range []string{"header-id", "nope", "js-1", "js-999"} {
		if w, err := jobqueue.Find(ctx, n.JS, id); !errors.Is(err, jobqueue.ErrNotWaiting) {
			t.Errorf("Find(%s) = %+v, %v; want ErrNotWaiting", id, w, err)
		}
	}
}

// BenchmarkFindDeep finds the last of 10,000 waiting jobs of 1 KiB: the
// cost of status or cancel of an id without a record on a deep queue.
func BenchmarkFindDeep(b *testing.B) {
	n := testenv.StartNATS(b)
	ctx := testenv.Context(b, 10*time.Minute)
	if err := contract.EnsureJobsStream(ctx, n.JS, contract.Options{}); err != nil {
		b.Fatal(err)
	}
	pad := make([]byte, 1000)
	for i := range pad {
		pad[i] = 'x'
	}
	const depth = 10000
	for i := range depth {
		id := fmt.Sprintf("deep-%05d", i)
		publish(b, n, "sluice.jobs.video", id, fmt.Sprintf(`{"id":%q,"kind":"video","pad":%q}`, id, pad))
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := jobqueue.Find(ctx, n.JS, fmt.Sprintf("deep-%05d", depth-1)); err != nil {
			b.Fatal(err)
		}
	}
}
