package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/state"
)

// eventLog reads SLUICE_EVENTS from the start, message by message, so it
// loses nothing across a NATS restart: each poll goes on after the last
// sequence it read.
type eventLog struct {
	mu       sync.Mutex
	last     uint64
	terminal map[string][]events.Event
	bad      []string // events that are not CloudEvents JSON
	raw      [][]byte
}

func newEventLog() *eventLog {
	return &eventLog{terminal: make(map[string][]events.Event)}
}

// poll reads the events published since the last poll.
func (l *eventLog) poll(ctx context.Context, js jetstream.JetStream) error {
	s, err := js.Stream(ctx, contract.EventsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for seq := l.last + 1; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			l.last = seq
			continue
		}
		if err != nil {
			return err
		}
		l.last = seq
		l.raw = append(l.raw, m.Data)
		var ev events.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev.ID != m.Header.Get(contract.HeaderMsgID) {
			l.bad = append(l.bad, m.Subject)
			continue
		}
		if state.Status(ev.Data.Status).Terminal() {
			l.terminal[ev.Subject] = append(l.terminal[ev.Subject], ev)
		}
	}
	return nil
}

// terminalJobs is how many jobs have at least one terminal event.
func (l *eventLog) terminalJobs() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.terminal)
}
