// Package reach tells how well this worker reaches JetStream. Every loop
// that talks to JetStream (the consumer's pulls, heartbeats and sweeps,
// state writes, event publishes, the start-up setup) reports each attempt
// to its Loop: a loop that starts failing says so once, at warn, with the
// reason; once more, at info, when it recovers; and a metric shows it
// meanwhile. The loops space their own retries with internal/backoff.
//
// The Watch they share also decides when the worker is on the wrong side of
// a partition: when no JetStream leader has answered for longer than
// MoveAfter while the connection stands, the server it is connected to has
// lost the cluster, and the Watch moves the connection to another server
// (nats.go's Conn.ForceReconnect).
package reach

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/natsconn"
)

// Config configures a Watch. Every field is optional.
type Config struct {
	// Conn is the connection to move; nil: never move.
	Conn *nats.Conn
	// MoveAfter is how long no JetStream leader may answer, while Conn is
	// connected, before Conn moves to another server; 0: never move.
	MoveAfter time.Duration
	// Logger defaults to a disabled logger.
	Logger *zerolog.Logger
	// Waiting is told when a loop starts (true) and stops (false) waiting
	// for JetStream.
	Waiting func(loop string, waiting bool)
	// Failed is told of every failed attempt with its reason (Reason).
	Failed func(loop, reason string)
	// Moved is told of every move to another server.
	Moved func()
	// NoSpace is told of every attempt JetStream refused for lack of
	// space (natsconn.NoSpace), with the loop and the refusal.
	NoSpace func(loop string, err error)
}

// Watch is shared by the loops of one connection. A nil *Watch accepts
// every call and does nothing.
type Watch struct {
	cfg Config
	log zerolog.Logger

	mu sync.Mutex
	// cutSince is when the current run of unreachable failures began (zero
	// when a leader answered since the last one); timer fires MoveAfter
	// after it.
	cutSince time.Time
	timer    *time.Timer
}

// New returns a Watch.
func New(cfg Config) *Watch {
	w := &Watch{cfg: cfg, log: zerolog.Nop()}
	if cfg.Logger != nil {
		w.log = *cfg.Logger
	}
	return w
}

// MoveAfter is the Watch's bound (0 when it never moves).
func (w *Watch) MoveAfter() time.Duration {
	if w == nil || w.cfg.Conn == nil {
		return 0
	}
	return w.cfg.MoveAfter
}

// ProbeEvery is how often an idle loop should ask a leader whether it still
// hears its group (see Quorum): a quarter of MoveAfter, 2.5s when the Watch
// never moves (a failing loop still has to learn that it recovered); 0 for
// a nil Watch.
func (w *Watch) ProbeEvery() time.Duration {
	if w == nil {
		return 0
	}
	return cmp.Or(w.MoveAfter()/4, 2500*time.Millisecond)
}

// StaleAfter is how long a leader may go without hearing a peer before the
// peer counts as lost (see Quorum): half of MoveAfter within [1s, 5s]
// (Raft heartbeats come every second).
func (w *Watch) StaleAfter() time.Duration {
	return min(max(w.MoveAfter()/2, time.Second), 5*time.Second)
}

// Loop returns the loop named name ("pull video", "heartbeats", ...).
func (w *Watch) Loop(name string) *Loop { return &Loop{w: w, name: name} }

// Stop ends the Watch's timer.
func (w *Watch) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.cutSince = time.Time{}
}

// unreachable records a failure that says no leader answered, which began
// `ago` before now.
func (w *Watch) unreachable(ago time.Duration) {
	if w.MoveAfter() <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	since := time.Now().Add(-ago)
	if w.cutSince.IsZero() || since.Before(w.cutSince) {
		w.cutSince = since
		w.arm()
	}
}

// arm sets the timer to the moment the current run passes MoveAfter.
func (w *Watch) arm() {
	d := time.Until(w.cutSince.Add(w.cfg.MoveAfter))
	if w.timer == nil {
		w.timer = time.AfterFunc(d, w.check)
		return
	}
	w.timer.Reset(d)
}

// answered records an answer from a JetStream leader.
func (w *Watch) answered() {
	if w.MoveAfter() <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cutSince = time.Time{}
	if w.timer != nil {
		w.timer.Stop()
	}
}

// check moves the connection when no leader has answered for MoveAfter.
func (w *Watch) check() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cutSince.IsZero() {
		return
	}
	cut := time.Since(w.cutSince)
	if cut < w.cfg.MoveAfter {
		w.arm()
		return
	}
	nc := w.cfg.Conn
	if !nc.IsConnected() {
		// The client is changing servers on its own already.
		w.cutSince = time.Now()
		w.arm()
		return
	}
	from := nc.ConnectedUrlRedacted()
	w.log.Warn().Str("server", from).Dur("unreachable_for", cut.Round(time.Millisecond)).
		Msg("no JetStream leader answers through this server; moving to another server")
	if err := nc.ForceReconnect(); err != nil {
		w.log.Warn().Err(err).Msg("cannot move to another server")
	} else if w.cfg.Moved != nil {
		w.cfg.Moved()
	}
	// The next move, if this one does not help, comes MoveAfter later.
	w.cutSince = time.Now()
	w.arm()
}

// Loop is one loop's run of failures. Its methods are safe for concurrent
// use; a nil *Loop does nothing.
type Loop struct {
	w    *Watch
	name string

	mu       sync.Mutex
	failing  bool
	since    time.Time
	failures int
}

// Fail records a failed attempt. The first of a run is logged at warn with
// its reason, and the loop shows as waiting until OK.
func (l *Loop) Fail(err error) {
	if l == nil || err == nil {
		return
	}
	reason, unreachable := Reason(err)
	var cut *CutOff
	ago := time.Duration(0)
	if errors.As(err, &cut) {
		ago = cut.For
	}
	if unreachable {
		l.w.unreachable(ago)
	}
	if l.w == nil {
		return
	}
	if l.w.cfg.Failed != nil {
		l.w.cfg.Failed(l.name, reason)
	}
	if reason == ReasonNoSpace && l.w.cfg.NoSpace != nil {
		l.w.cfg.NoSpace(l.name, err)
	}
	l.mu.Lock()
	l.failures++
	first := !l.failing
	if first {
		l.failing, l.since = true, time.Now()
	}
	l.mu.Unlock()
	if first {
		l.w.log.Warn().Err(err).Str("loop", l.name).Str("reason", reason).
			Msg("waiting for JetStream: retrying with backoff")
		if l.w.cfg.Waiting != nil {
			l.w.cfg.Waiting(l.name, true)
		}
	}
}

// OK records an answer from JetStream. A loop that was failing says that
// it recovered, after how long and how many failures.
func (l *Loop) OK() {
	if l == nil || l.w == nil {
		return
	}
	l.w.answered()
	l.recovered()
}

// recovered ends the loop's run of failures, saying so when there was one.
func (l *Loop) recovered() {
	l.mu.Lock()
	was, since, failures := l.failing, l.since, l.failures
	l.failing, l.failures = false, 0
	l.mu.Unlock()
	if was {
		l.w.log.Info().Str("loop", l.name).Dur("waited", time.Since(since).Round(time.Millisecond)).
			Int("failures", failures).Msg("JetStream reachable again")
		if l.w.cfg.Waiting != nil {
			l.w.cfg.Waiting(l.name, false)
		}
	}
}

// Sent records an attempt that went out with no answer to wait for (a
// heartbeat): a failing loop recovers, but no leader is proven reachable.
func (l *Loop) Sent() {
	if l == nil || l.w == nil {
		return
	}
	l.recovered()
}

// ReasonNoSpace is the Reason of a write JetStream refused for lack of
// space: a leader answered, so it is no reason to move.
const ReasonNoSpace = "no_space"

// Reason names the kind of a JetStream failure for logs and metrics, and
// tells whether it means that no JetStream leader answered.
func Reason(err error) (reason string, unreachable bool) {
	var apiErr *jetstream.APIError
	var cut *CutOff
	switch {
	case natsconn.NoSpace(err):
		// Before the 503s: some refusals for space come with that code.
		return ReasonNoSpace, false
	case errors.As(err, &cut) && cut.Leader == "":
		return "no_leader", true
	case errors.As(err, &cut):
		return "leader_cut_off", true
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse):
		return "no_responders", true
	case errors.Is(err, jetstream.ErrConsumerLeadershipChanged):
		return "leadership_change", true
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, jetstream.ErrNoHeartbeat):
		return "timeout", true
	case errors.As(err, &apiErr) && (apiErr.Code == 503 || slices.Contains(clusterErrCodes, apiErr.ErrorCode)):
		return "unavailable", true
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected), errors.Is(err, jetstream.ErrServerShutdown):
		return "disconnected", false
	case errors.Is(err, context.Canceled):
		return "cancelled", false
	}
	return "error", false
}

// clusterErrCodes are the JetStream errors of a cluster that has lost
// peers or leaders for now: no peers for placement (10005), not the leader
// (10009), stream or consumer offline (10118, 10119).
var clusterErrCodes = []jetstream.ErrorCode{10005, 10009, 10118, 10119}

// CutOff says that the JetStream leader that answered has not heard from a
// quorum of its group for For: it is on the minority side of a partition
// and serves nothing new. With no Leader, the answer came from a member of
// a group that has no leader (a server answers information requests from
// its own copy then), which proves no more than no answer at all.
type CutOff struct {
	Leader string
	For    time.Duration
}

func (c *CutOff) Error() string {
	if c.Leader == "" {
		return "JetStream group has no leader: a member answered from its own copy"
	}
	return fmt.Sprintf("JetStream leader %s has not heard from a quorum of its peers for %s", c.Leader, c.For.Round(time.Second))
}

// Quorum checks the cluster information of a stream or consumer as an
// answer came with it: it returns a *CutOff when no leader answered (a
// member of a leaderless group answers information requests from its own
// copy: nats-server does so once the group has lost its leader, which is
// just what a server cut off from its cluster sees) or when the leader has
// seen fewer peers than a quorum needs within staleAfter; else nil (also
// for a single server and a group without replicas).
func Quorum(ci *jetstream.ClusterInfo, staleAfter time.Duration) error {
	if ci == nil {
		return nil
	}
	if ci.Leader == "" {
		return &CutOff{}
	}
	if len(ci.Replicas) == 0 {
		return nil
	}
	need := (len(ci.Replicas) + 1) / 2 // a quorum of the group, the leader excluded
	var seen []time.Duration           // how long ago each peer online was seen
	for _, p := range ci.Replicas {
		if !p.Offline {
			seen = append(seen, p.Active)
		}
	}
	slices.Sort(seen)
	if len(seen) >= need && seen[need-1] <= staleAfter {
		return nil
	}
	cut := staleAfter
	if len(seen) >= need {
		cut = seen[need-1]
	}
	return &CutOff{Leader: ci.Leader, For: cut}
}
