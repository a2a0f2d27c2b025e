package worker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/config"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/watchdog"
)

// TestLostWriteAnswersEndJobsOnce runs a worker whose NATS connection
// loses the answer of one write: the SLUICE_SPECS write before anything
// is paid, then a SLUICE_STATE checkpoint, each once after the server
// applied it and once before it reached the server. The worker's jobs
// have no deadline, so only the worker's own bound on each write ends the
// wait: every job must succeed within that bound, with one terminal event
// and one paid submit.
func TestLostWriteAnswersEndJobsOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	drop := testenv.StartReplyDropper(t, strings.TrimPrefix(b.nats.URL, "nats://"))
	b.start(t, func(c *config.Config) { c.NATSURL = drop.URL() })
	for _, c := range []struct {
		name, prefix string
		arm          func(prefix string, n int)
	}{
		{"spec-applied", contract.SpecsBucket, drop.Arm},
		{"spec-unapplied", contract.SpecsBucket, drop.ArmUnapplied},
		{"state-applied", contract.StateBucket, drop.Arm},
		{"state-unapplied", contract.StateBucket, drop.ArmUnapplied},
	} {
		id, prompt := "lost-"+c.name, "a write whose answer is lost: "+c.name
		before := drop.Dropped()
		c.arm("$KV."+c.prefix+".", 1)
		b.publish(t, "video", id, videoSpec(id, prompt))
		// 45s: a lost answer costs one write's timeout (5s) and a read.
		ev := b.await(t, id, 45*time.Second)
		if ev.Data.Status != string(state.StatusSucceeded) {
			t.Errorf("%s: job ended %s %+v, want succeeded", c.name, ev.Data.Status, ev.Data.Error)
		}
		if drop.Dropped() != before+1 {
			t.Errorf("%s: %d writes lost, want 1", c.name, drop.Dropped()-before)
		}
		if n := b.media.SubmitCount(prompt); n != 1 {
			t.Errorf("%s: submits = %d, want 1", c.name, n)
		}
	}
	b.settled(t, 30*time.Second)
	for _, id := range []string{"lost-spec-applied", "lost-spec-unapplied", "lost-state-applied", "lost-state-unapplied"} {
		n := 0
		for _, ev := range b.events(t) {
			if ev.Subject == id && state.Status(ev.Data.Status).Terminal() {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d terminal events, want 1", id, n)
		}
	}
}

// TestStuckJobIsHandedBack holds a job in its first step far longer than
// the step's bound: every SLUICE_SPECS write loses itself before reaching
// the server, so keeping the spec goes on for its full 30s of lost
// answers, while the watchdog's bounds are 2 and 4 times SLUICE_ACK_WAIT
// (5s; SLUICE_STUCK_MIN_DEADLINE lowered below it). The worker must log the job stuck once, at received, then hand
// its delivery back; once the writes pass again, the job's next delivery
// ends it, with one paid submit and one terminal event.
func TestStuckJobIsHandedBack(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	drop := testenv.StartReplyDropper(t, strings.TrimPrefix(b.nats.URL, "nats://"))
	b.start(t, func(c *config.Config) {
		c.NATSURL, c.StuckFactor, c.StuckHandBack, c.StuckMinDeadline = drop.URL(), 2, 4, time.Second
	})
	drop.ArmUnapplied("$KV."+contract.SpecsBucket+".", 1_000_000)
	const id, prompt = "held-too-long", "a job whose spec cannot be kept"
	b.publish(t, "video", id, videoSpec(id, prompt))
	waitFor(t, time.Minute, "the job handed back", func() bool {
		return strings.Contains(b.logs.String(), watchdog.LogHandedBack)
	})
	drop.Arm("$KV."+contract.SpecsBucket+".", 0)
	ev := b.await(t, id, time.Minute)
	if ev.Data.Status != string(state.StatusSucceeded) {
		t.Errorf("job ended %s %+v, want succeeded", ev.Data.Status, ev.Data.Error)
	}
	logs := b.logs.String()
	if n := strings.Count(logs, watchdog.LogStuck); n != 1 || !strings.Contains(logs, `"step":"received"`) {
		t.Errorf("stuck logged %d times (want once, at received)", n)
	}
	if n := b.media.SubmitCount(prompt); n != 1 {
		t.Errorf("submits = %d, want 1", n)
	}
	b.settled(t, 30*time.Second)
	n := 0
	for _, ev := range b.events(t) {
		if ev.Subject == id && state.Status(ev.Data.Status).Terminal() {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d terminal events, want 1", n)
	}
}
