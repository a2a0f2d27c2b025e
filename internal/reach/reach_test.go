package reach_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/natsconn"
	"github.com/sluice-dev/sluice/internal/reach"
	"github.com/sluice-dev/sluice/internal/testenv"
)

func TestReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err         error
		reason      string
		unreachable bool
	}{
		{nats.ErrNoResponders, "no_responders", true},
		{fmt.Errorf("bind: %w", nats.ErrNoResponders), "no_responders", true},
		{jetstream.ErrNoStreamResponse, "no_responders", true},
		{jetstream.ErrConsumerLeadershipChanged, "leadership_change", true},
		{context.DeadlineExceeded, "timeout", true},
		{nats.ErrTimeout, "timeout", true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, "unavailable", true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10005, Description: "no suitable peers for placement"}, "unavailable", true},
		{&reach.CutOff{Leader: "n1", For: time.Minute}, "leader_cut_off", true},
		{&reach.CutOff{}, "no_leader", true},
		{nats.ErrConnectionClosed, "disconnected", false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}, "error", false},
		{errors.New("permissions violation"), "error", false},
		// Refusals for lack of space: a leader answered, 503 or not.
		{&jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}, "no_space", false},
		{fmt.Errorf("write state j: %w", &jetstream.APIError{Code: 503, ErrorCode: 10023, Description: "insufficient resources"}), "no_space", false},
		{&jetstream.APIError{Code: 500, ErrorCode: 10047, Description: "insufficient storage resources available"}, "no_space", false},
		{&jetstream.APIError{Code: 400, ErrorCode: 10002, Description: "resource limits exceeded for account"}, "no_space", false},
	}
	for _, tt := range tests {
		if got := natsconn.NoSpace(tt.err); got != (tt.reason == reach.ReasonNoSpace) {
			t.Errorf("NoSpace(%v) = %v", tt.err, got)
		}
		reason, unreachable := reach.Reason(tt.err)
		if reason != tt.reason || unreachable != tt.unreachable {
			t.Errorf("Reason(%v) = %s, %v; want %s, %v", tt.err, reason, unreachable, tt.reason, tt.unreachable)
		}
	}
}

func TestQuorum(t *testing.T) {
	t.Parallel()
	peer := func(active time.Duration, offline bool) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: "p", Active: active, Offline: offline, Current: !offline}
	}
	stale := 2 * time.Second
	tests := []struct {
		name string
		ci   *jetstream.ClusterInfo
		cut  time.Duration // 0: not cut off; -1: no leader
	}{
		{"single server", nil, 0},
		{"leaderless member", &jetstream.ClusterInfo{Replicas: []*jetstream.PeerInfo{peer(0, false), peer(0, false)}}, -1},
		{"R1", &jetstream.ClusterInfo{Leader: "n1"}, 0},
		{"R3 healthy", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer(100*time.Millisecond, false), peer(300*time.Millisecond, false)}}, 0},
		{"R3 one peer lost", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer(100*time.Millisecond, false), peer(time.Minute, false)}}, 0},
		{"R3 both lost", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer(7*time.Second, false), peer(9*time.Second, false)}}, 7 * time.Second},
		{"R3 both offline", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer(0, true), peer(0, true)}}, stale},
		{"R5 one of two needed lost", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{
			peer(100*time.Millisecond, false), peer(5*time.Second, false), peer(6*time.Second, false), peer(0, true)}}, 5 * time.Second},
	}
	for _, tt := range tests {
		err := reach.Quorum(tt.ci, stale)
		var cut *reach.CutOff
		switch {
		case tt.cut == 0 && err != nil:
			t.Errorf("%s: %v, want nil", tt.name, err)
		case tt.cut < 0:
			if !errors.As(err, &cut) || cut.Leader != "" {
				t.Errorf("%s: %v, want no leader", tt.name, err)
			}
		case tt.cut != 0 && (!errors.As(err, &cut) || cut.For != tt.cut || cut.Leader != "n1"):
			t.Errorf("%s: %v, want cut off for %s", tt.name, err, tt.cut)
		}
	}
}

// TestLoopTellsOfNoSpace: every refusal for lack of space reaches
// Config.NoSpace with its loop; other failures do not.
func TestLoopTellsOfNoSpace(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var told []string
	w := reach.New(reach.Config{NoSpace: func(loop string, err error) {
		mu.Lock()
		told = append(told, loop)
		mu.Unlock()
		if !natsconn.NoSpace(err) {
			t.Errorf("told of %v", err)
		}
	}})
	full := &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum bytes exceeded"}
	w.Loop("state writes").Fail(full)
	w.Loop("state writes").Fail(full)
	w.Loop("event publishes").Fail(nats.ErrNoResponders)
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 2 || told[0] != "state writes" {
		t.Errorf("told %v, want state writes twice", told)
	}
}

func TestLoopSaysOnceAndRecovers(t *testing.T) {
	t.Parallel()
	var logs testenv.SyncBuffer
	log := zerolog.New(&logs)
	var mu sync.Mutex
	waiting := map[string]bool{}
	failed := map[string]int{}
	w := reach.New(reach.Config{
		Logger:  &log,
		Waiting: func(loop string, v bool) { mu.Lock(); waiting[loop] = v; mu.Unlock() },
		Failed:  func(loop, reason string) { mu.Lock(); failed[loop+"/"+reason]++; mu.Unlock() },
	})
	l := w.Loop("pull video")
	for range 50 {
		l.Fail(nats.ErrNoResponders)
	}
	l.Fail(context.DeadlineExceeded)
	mu.Lock()
	if !waiting["pull video"] || failed["pull video/no_responders"] != 50 || failed["pull video/timeout"] != 1 {
		t.Errorf("while failing: waiting %v, failed %v", waiting, failed)
	}
	mu.Unlock()
	if n := strings.Count(logs.String(), "waiting for JetStream"); n != 1 {
		t.Errorf("said %d times that it waits, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), `"reason":"no_responders"`) || !strings.Contains(logs.String(), `"loop":"pull video"`) {
		t.Errorf("the warning does not say which loop or why:\n%s", logs.String())
	}
	l.OK()
	l.OK()
	if n := strings.Count(logs.String(), "JetStream reachable again"); n != 1 || !strings.Contains(logs.String(), `"failures":51`) {
		t.Errorf("recovery said %d times (want once, with 51 failures):\n%s", n, logs.String())
	}
	mu.Lock()
	if waiting["pull video"] {
		t.Error("the loop still shows as waiting after it recovered")
	}
	mu.Unlock()
	// A second run says so again.
	l.Fail(nats.ErrNoResponders)
	if n := strings.Count(logs.String(), "waiting for JetStream"); n != 2 {
		t.Errorf("a second outage said %d times in all, want 2", n)
	}
	// A nil Watch and its loops accept every call.
	var nw *reach.Watch
	nl := nw.Loop("x")
	nl.Fail(nats.ErrNoResponders)
	nl.OK()
	nl.Sent()
	nw.Stop()
	if nw.MoveAfter() != 0 || nw.ProbeEvery() != 0 {
		t.Error("a nil Watch moves or probes")
	}
}

func TestWatchMovesOnlyWhenNoLeaderAnswers(t *testing.T) {
	t.Parallel()
	n := testenv.StartNATS(t)
	reconnected := make(chan string, 4)
	nc, err := nats.Connect(n.URL, nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond),
		nats.ReconnectHandler(func(c *nats.Conn) { reconnected <- c.ConnectedUrl() }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var logs testenv.SyncBuffer
	log := zerolog.New(&logs)
	moved := make(chan struct{}, 4)
	w := reach.New(reach.Config{Conn: nc, MoveAfter: 200 * time.Millisecond, Logger: &log, Moved: func() { moved <- struct{}{} }})
	defer w.Stop()

	// Failures that are not about reaching a leader never move.
	w.Loop("setup").Fail(errors.New("permissions violation"))
	// Heartbeats going out prove no leader: they do not stop a move.
	hb := w.Loop("heartbeats")
	pull := w.Loop("pull video")
	pull.Fail(nats.ErrNoResponders)
	hb.Sent()
	select {
	case <-moved:
	case <-time.After(20 * time.Second):
		t.Fatal("no move after the bound")
	}
	select {
	case <-reconnected:
	case <-time.After(20 * time.Second):
		t.Fatal("the connection did not reconnect")
	}
	if !strings.Contains(logs.String(), "moving to another server") {
		t.Errorf("the move is not logged:\n%s", logs.String())
	}

	// A leader's answer stops the clock.
	pull.OK()
	w2 := reach.New(reach.Config{Conn: nc, MoveAfter: 100 * time.Millisecond, Moved: func() { t.Error("moved although a leader answered") }})
	defer w2.Stop()
	l := w2.Loop("pull video")
	l.Fail(nats.ErrNoResponders)
	l.OK()
	time.Sleep(300 * time.Millisecond) // past the bound: a move would have happened by now
}
