// Package explore is the decision-point explorer: it runs the real worker
// in-process against the simulators, embedded NATS and the S3 store, and
// at every upstream call and every write of a job's state or spec chooses
// what happens there from a seed. A seed replays the same choices; after
// each schedule the invariants of docs/guarantees.md ("The decision-point
// explorer") are checked against the simulators' own records.
package explore

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"
)

// Choice is what happens at one decision point.
type Choice string

// The choices. Upstream calls meet all but the NATS ones; writes to
// SLUICE_STATE and SLUICE_SPECS meet Normal, the NATS ones and the crashes.
const (
	Normal      Choice = "normal"
	Busy        Choice = "busy"       // HTTP 200, code 10001, "busy"
	Internal    Choice = "internal"   // HTTP 200, code 10001, internal error
	Permission  Choice = "permission" // HTTP 200, code 10008
	NotFound    Choice = "404"
	LostAnswer  Choice = "lost-answer" // the platform acts, the answer is lost
	Delay       Choice = "delay"       // answered normally after AckWait
	CrashBefore Choice = "crash-before"
	CrashAfter  Choice = "crash-after"
	ReplyLost   Choice = "reply-lost" // NATS write applied, its reply lost
	WriteLost   Choice = "write-lost" // NATS write not applied, no reply
)

var (
	httpChoices  = []Choice{Busy, Internal, Permission, NotFound, LostAnswer, Delay, CrashBefore, CrashAfter}
	writeChoices = []Choice{ReplyLost, WriteLost, CrashBefore, CrashAfter}
)

// Decision is one decision point met and what was chosen there.
type Decision struct {
	Point  string // route class or write, job, occurrence: "submit/j1#1"
	Choice Choice
}

// schedule chooses at each decision point from its seed alone: the choice
// at a point is f(seed, point), and a point names its n-th occurrence, so
// the same seed makes the same choices whatever the goroutines' order.
type schedule struct {
	seed uint64
	// faultPct is the share (in percent) of points that get a fault; the
	// rest answer normally, so a job can finish.
	faultPct uint64
	// crashes bounds the crashes of a schedule (each costs an AckWait).
	crashes int

	mu       sync.Mutex
	seen     map[string]int
	crashed  int
	decided  []Decision
	faultsAt int
	// last is when a point was last met: the schedule's last progress.
	last time.Time
}

func newSchedule(seed uint64) *schedule {
	return &schedule{seed: seed, faultPct: 12, crashes: 2, seen: map[string]int{}, last: time.Now()}
}

// decide returns the choice at the next occurrence of class for job among
// normal and choices.
func (s *schedule) decide(class, job string, choices []Choice) Choice {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := class + "/" + job
	s.seen[key]++
	s.last = time.Now()
	point := fmt.Sprintf("%s#%d", key, s.seen[key])
	h := hash(s.seed, point)
	c := Normal
	if h%100 < s.faultPct {
		c = choices[(h/100)%uint64(len(choices))]
	}
	if (c == CrashBefore || c == CrashAfter) && s.crashed >= s.crashes {
		c = Normal
	}
	if c == CrashBefore || c == CrashAfter {
		s.crashed++
	}
	if c != Normal {
		s.faultsAt++
	}
	s.decided = append(s.decided, Decision{Point: point, Choice: c})
	return c
}

// quietFor is how long no decision point has been met.
func (s *schedule) quietFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.last)
}

// hash is FNV-1a of the seed and the point.
func hash(seed uint64, point string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	_, _ = h.Write(b[:])
	_, _ = h.Write([]byte(point))
	return h.Sum64()
}

// points returns the decision points met (without their occurrence
// number's order: sorted) and the non-normal decisions, in the order met.
func (s *schedule) points() (all []string, faults []Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.decided {
		all = append(all, d.Point)
		if d.Choice != Normal {
			faults = append(faults, d)
		}
	}
	sort.Strings(all)
	return all, faults
}

// describe renders faults for a failure message.
func describe(faults []Decision) string {
	var b strings.Builder
	for _, d := range faults {
		fmt.Fprintf(&b, "%s=%s ", d.Point, d.Choice)
	}
	return strings.TrimSpace(b.String())
}
