package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
)

// videoSpec is the job spec of a video job whose prompt carries the given
// simulator directives.
func videoSpec(id, directives string) []byte {
	spec := map[string]any{
		"version": 1, "id": id, "kind": "video",
		"video": map[string]any{
			"model":      "video-model",
			"input":      map[string]any{"prompt": "a paper boat drifting down a rain gutter, job " + id + " " + directives},
			"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
		},
	}
	b, _ := json.Marshal(spec)
	return b
}

// publishJobs publishes one video spec per id with Nats-Msg-Id = id and
// waits for every publish acknowledgement; it returns when each was
// published.
func (s *stack) publishJobs(ctx context.Context, ids []string, directives string) (map[string]time.Time, error) {
	at := make(map[string]time.Time, len(ids))
	var futures []jetstream.PubAckFuture
	for _, id := range ids {
		m := nats.NewMsg(contract.JobSubject("video"))
		m.Data = videoSpec(id, directives)
		m.Header.Set(contract.HeaderMsgID, id)
		at[id] = time.Now()
		f, err := s.js.PublishMsgAsync(m)
		if err != nil {
			return nil, fmt.Errorf("publish %s: %w", id, err)
		}
		futures = append(futures, f)
	}
	select {
	case <-s.js.PublishAsyncComplete():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return nil, fmt.Errorf("publish %s: %w", f.Msg().Header.Get(contract.HeaderMsgID), err)
		}
	}
	return at, nil
}

// tracker follows the events of the jobs whose ids start with a prefix:
// when each first reached a status.
type tracker struct {
	sub    *nats.Subscription
	prefix string

	mu       sync.Mutex
	seen     map[string]map[string]time.Time // status -> job id -> first seen
	terminal map[string]string               // job id -> terminal status
	changed  chan struct{}
}

// track subscribes to every event of jobs whose ids start with prefix.
func (s *stack) track(prefix string) (*tracker, error) {
	t := &tracker{prefix: prefix, seen: map[string]map[string]time.Time{}, terminal: map[string]string{}, changed: make(chan struct{}, 1)}
	sub, err := s.nc.Subscribe(contract.EventsSubjectPrefix+">", t.onEvent)
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	t.sub = sub
	return t, s.nc.Flush()
}

func (t *tracker) onEvent(m *nats.Msg) {
	now := time.Now()
	status := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	id := strings.TrimSuffix(m.Header.Get(contract.HeaderMsgID), "."+status)
	if !strings.HasPrefix(id, t.prefix) {
		return
	}
	t.mu.Lock()
	byID := t.seen[status]
	if byID == nil {
		byID = map[string]time.Time{}
		t.seen[status] = byID
	}
	if _, ok := byID[id]; !ok {
		byID[id] = now
	}
	switch status {
	case "succeeded", "failed", "cancelled":
		if _, ok := t.terminal[id]; !ok {
			t.terminal[id] = status
		}
	}
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// count returns how many jobs reached status.
func (t *tracker) count(status string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen[status])
}

// at returns when job id first reached status.
func (t *tracker) at(status, id string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.seen[status][id]
	return v, ok
}

// terminalCount returns how many jobs ended, and how many of them did not
// succeed.
func (t *tracker) terminalCount() (ended, unsuccessful int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, st := range t.terminal {
		if st != "succeeded" {
			unsuccessful++
		}
	}
	return len(t.terminal), unsuccessful
}

// lastTerminal returns the time of the latest first terminal event.
func (t *tracker) lastTerminal() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, st := range []string{"succeeded", "failed", "cancelled"} {
		for _, at := range t.seen[st] {
			if at.After(last) {
				last = at
			}
		}
	}
	return last
}

// waitFor waits until cond holds, checking it after every event and every
// 100ms.
func (t *tracker) waitFor(ctx context.Context, within time.Duration, what string, cond func() bool) error {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-t.changed:
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("%s: not reached within %s", what, within)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// waitEnded waits until n jobs have a terminal event.
func (t *tracker) waitEnded(ctx context.Context, n int, within time.Duration) error {
	return t.waitFor(ctx, within, fmt.Sprintf("%d terminal events", n), func() bool {
		ended, _ := t.terminalCount()
		return ended >= n
	})
}

func (t *tracker) close() { _ = t.sub.Unsubscribe() }

// jobIDs returns n ids prefix-00000, prefix-00001, ...
func jobIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return ids
}
