package quota

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/contract"
)

// A dead worker's leases would count, and its jobs stay held, until an
// AckWait after its last heartbeat: with a minute's AckWait, a minute of
// paid quota idle while jobs wait. The watch learns of a death from the
// NATS server instead. Every worker answers requests on its alive subject
// while its connection is up; the server answers "no responders" as soon
// as the connection of a killed process closes. A worker asks each other
// holder of leases every aliveEvery; one that has answered before and
// then gives no responders for deadAfter (at least deadPings times in a
// row, while the asker's own connection has been up that long) is dead:
// its leases are handed back (planGone) and its deliveries Nak'd, so its
// jobs come back at once to resume their tasks on the living.
//
// A worker restarted under the same name answers for the name at once, so
// each process answers with an id of its own life (a fresh nuid), which
// its leases carry too: a holder that answers with another life than the
// one heard before has died and been replaced, and the leases of the old
// life are handed over the same way.
//
// A worker cut off from NATS looks the same once the server drops its
// connection; its jobs then come back early, as they would an AckWait
// later. The fence around a paid submit (runner.paying) does not move: a
// job whose holder died inside its submit still waits for its record to
// stay unchanged for two AckWaits.
const (
	aliveEvery = time.Second
	deadAfter  = 3 * time.Second
	deadPings  = 3
	// selfCheckEvery spaces the checks that this worker's own alive
	// subject answers (its permissions may not allow it yet).
	selfCheckEvery = 30 * time.Second
)

// LogHeard is logged (debug) when a holder of leases first answers on its
// alive subject: from then on its death is known within deadAfter.
const LogHeard = "a worker holding leases answers on its alive subject"

// LogAnnounced is logged (debug) once this worker's own alive subject
// answers: from then on its leases carry their replies.
const LogAnnounced = "this worker answers on its alive subject"

// LogGone is logged, with the way of the death, when a life holding leases
// is found dead.
const LogGone = "a worker holding leases is gone (its NATS connection closed, or a new process answers for its name): handing its leases back and its jobs over"

// LogHandedOver is logged when a dead worker's leases were handed back.
const LogHandedOver = "a dead worker's leases handed back and its jobs delivered again"

// watch is the Fleet's view of the other holders' lives.
type watch struct {
	nc     *nats.Conn
	self   string
	ackTTL time.Duration
	leases []*leases
	log    zerolog.Logger
	now    func() time.Time
	count  func(key, op, outcome string)

	// inst names this process's life (see life).
	inst string

	mu sync.Mutex
	// heard is each holder's life that last answered, and when; silent
	// the holders that did not since.
	heard  map[string]heardLife
	silent map[string]*silence
	// lastHeard is when each life handed over last answered (for the Nak's
	// bound, see handedOver).
	lastHeard map[life]time.Time
	// up is since when this worker's own connection has been up, as
	// the watch saw it; reconnects is its count of reconnects then.
	up         time.Time
	reconnects uint64
}

// life is one process's life under a holder's name.
type life struct{ holder, inst string }

// death is a life found dead, and how: "silent" (no responders) or
// "replaced" (another life answers for the name).
type death struct {
	life
	how string
}

// aliveAnswer is a holder's answer on its alive subject: the life that
// answered, or the error.
type aliveAnswer struct {
	holder, inst string
	err          error
}

// heardLife is a holder's life as last heard.
type heardLife struct {
	inst string
	at   time.Time
}

// silence is a holder's run of "no responders".
type silence struct {
	since time.Time
	pings int
	// gone: its leases were handed over.
	gone bool
}

func newWatch(cfg Config, ls []*leases) *watch {
	return &watch{
		nc: cfg.Conn, self: cfg.Holder, ackTTL: cfg.TTL, leases: ls,
		log: cfg.Logger.With().Str("component", "quota").Logger(), count: cfg.Count,
		// Lives are judged on the wall clock's elapsed time, as the
		// ticker runs, not on the boards' clock.
		now:   time.Now,
		inst:  nuid.Next(),
		heard: map[string]heardLife{}, silent: map[string]*silence{}, lastHeard: map[life]time.Time{},
	}
}

// run answers on this worker's alive subject and watches the others until
// ctx ends.
func (w *watch) run(ctx context.Context) {
	subject := contract.AliveSubject(w.self)
	sub, err := w.nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte(w.inst)) })
	if err != nil {
		w.log.Warn().Err(err).Str("subject", subject).Msg("cannot answer on this worker's alive subject; should it die, its jobs come back an AckWait later")
		return
	}
	defer func() { _ = sub.Unsubscribe() }()
	for warned := false; !w.announce(ctx, subject, &warned); {
		select {
		case <-ctx.Done():
			return
		case <-time.After(selfCheckEvery):
		}
	}
	t := time.NewTicker(aliveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.tick(ctx)
		}
	}
}

// announce checks that this worker's own alive subject answers, and then
// has its leases carry their replies: only then may another worker judge
// it by its silence. A worker whose NATS user may not subscribe to or
// publish on sluice.control.alive.* (an older permissions file) never
// announces, and is never judged.
func (w *watch) announce(ctx context.Context, subject string, warned *bool) bool {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := w.nc.RequestWithContext(rctx, subject, nil); err != nil {
		if ctx.Err() == nil && !*warned {
			*warned = true
			w.log.Warn().Err(err).Str("subject", subject).
				Msg("this worker's alive subject does not answer (its NATS user needs to subscribe to and publish on sluice.control.alive.*); should it die, its jobs come back an AckWait later; checking again every 30s")
		}
		return false
	}
	w.log.Debug().Str("subject", subject).Msg(LogAnnounced)
	for _, l := range w.leases {
		l.mu.Lock()
		l.announced, l.inst = true, w.inst
		l.mu.Unlock()
		l.poke()
	}
	return true
}

// tick asks every other announced holder whether it is alive, and hands
// over the leases of those found dead.
func (w *watch) tick(ctx context.Context) {
	now := w.now()
	if st := w.nc.Stats(); !w.nc.IsConnected() || st.Reconnects != w.reconnects || w.up.IsZero() {
		// A reconnect closed every connection's interest for a moment:
		// silences so far mean nothing.
		w.mu.Lock()
		w.up, w.reconnects, w.silent = now, st.Reconnects, map[string]*silence{}
		w.mu.Unlock()
		return
	}
	holders := map[string]bool{}
	for _, l := range w.leases {
		for _, h := range l.announcedHolders() {
			if h != w.self {
				holders[h] = true
			}
		}
	}
	answers := make(chan aliveAnswer, len(holders))
	for h := range holders {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, aliveEvery)
			defer cancel()
			m, err := w.nc.RequestWithContext(rctx, contract.AliveSubject(h), nil)
			a := aliveAnswer{holder: h, err: err}
			if err == nil {
				a.inst = string(m.Data)
			}
			w.count("alive", "ping", pingOutcome(err))
			answers <- a
		}()
	}
	w.mu.Lock()
	var gone []death
	for range holders {
		if g, ok := w.hear(<-answers, now); ok {
			gone = append(gone, g)
		}
	}
	// Forget holders no longer on any board.
	for h := range w.silent {
		if !holders[h] {
			delete(w.silent, h)
		}
	}
	for h := range w.heard {
		if !holders[h] {
			delete(w.heard, h)
		}
	}
	for g, at := range w.lastHeard {
		if now.Sub(at) > w.ackTTL {
			delete(w.lastHeard, g)
		}
	}
	w.mu.Unlock()
	for _, g := range gone {
		w.log.Info().Str("worker", g.holder).Str("death", g.how).Msg(LogGone)
		for _, l := range w.leases {
			l.markGone(g.life)
		}
	}
}

// pingOutcome is an alive request's outcome for Config.Count.
func pingOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, nats.ErrNoResponders):
		return "silent"
	}
	return "error"
}

// hear records one answer (w.mu held) and returns the life it shows dead:
// the one heard before, when another answers for the name now or none has
// answered for deadAfter.
func (w *watch) hear(a aliveAnswer, now time.Time) (death, bool) {
	s, prev := w.silent[a.holder], w.heard[a.holder]
	switch {
	case a.err == nil:
		if s != nil && s.gone {
			w.log.Warn().Str("worker", a.holder).
				Msg("a worker whose jobs were handed over answers again: it was cut off, not dead; its jobs' records decide which delivery goes on")
		}
		delete(w.silent, a.holder)
		if prev.at.IsZero() {
			w.log.Debug().Str("worker", a.holder).Msg(LogHeard)
		}
		w.heard[a.holder] = heardLife{a.inst, now}
		if prev.inst != "" && a.inst != "" && prev.inst != a.inst && (s == nil || !s.gone) {
			g := life{a.holder, prev.inst}
			w.lastHeard[g] = prev.at
			return death{g, "replaced"}, true
		}
	case errors.Is(a.err, nats.ErrNoResponders):
		if s == nil {
			s = &silence{since: now}
			w.silent[a.holder] = s
		}
		s.pings++
		if !s.gone && !prev.at.IsZero() && s.pings >= deadPings && now.Sub(s.since) >= deadAfter && now.Sub(w.up) >= deadAfter {
			s.gone = true
			g := life{a.holder, prev.inst}
			w.lastHeard[g] = prev.at
			return death{g, "silent"}, true
		}
	}
	return death{}, false
}

// handedOver Naks the deliveries of the jobs whose leases a write of l
// handed over from dead holders, so that they come back at once. A Nak
// goes out only within half an AckWait of the holder's last answer: its
// message cannot have been redelivered yet (its heartbeats came every
// quarter AckWait), and a Nak to a delivery's subject would take the
// message from whichever delivery holds it now.
func (w *watch) handedOver(resource string, handed map[string]lease) {
	now := w.now()
	var naked []string
	w.mu.Lock()
	for _, id := range slices.Sorted(maps.Keys(handed)) {
		old := handed[id]
		heard, ok := w.lastHeard[life{old.Holder, old.Inst}]
		if old.Reply == "" || !ok || now.Sub(heard) >= w.ackTTL/2 {
			continue
		}
		if err := w.nc.Publish(old.Reply, []byte("-NAK")); err != nil {
			w.log.Warn().Err(err).Str("job_id", id).Msg("cannot hand a dead worker's job over; it comes back an AckWait after its last heartbeat")
			continue
		}
		naked = append(naked, id)
	}
	w.mu.Unlock()
	w.log.Info().Str("quota", resource).Int("leases", len(handed)).Strs("jobs", naked).
		Msg(LogHandedOver)
}

// announcedHolders are the holders of live leases that carry a reply.
func (l *leases) announcedHolders() []string {
	now := l.clock.Now().UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ls := range l.view.live(now).Leases {
		if ls.Holder != "" && ls.Reply != "" && !slices.Contains(out, ls.Holder) {
			out = append(out, ls.Holder)
		}
	}
	return out
}

// markGone has l's next write hand the leases of a dead life back.
func (l *leases) markGone(g life) {
	l.mu.Lock()
	l.gone[g] = true
	l.mu.Unlock()
	l.poke()
}

// ackSubject keeps reply when it is a JetStream ack subject ("" otherwise:
// an orphan the sweep handed over has none).
func ackSubject(reply string) string {
	if strings.HasPrefix(reply, "$JS.ACK.") {
		return reply
	}
	return ""
}
