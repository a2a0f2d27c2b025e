package contract

import (
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Class queues (docs/lifecycle.md, "Order of starts"): while fair
// scheduling is on, a worker's admission moves each job message from its
// kind's subject to the subject of its class, one per kind, priority and
// tenant, each served by a durable consumer of its own. The worker
// chooses which class starts next; a producer still publishes only to
// sluice.jobs.<kind>.
const classToken = "q"

// Headers the admission adds to a job message it moves to its class.
const (
	// HeaderPublished is when SLUICE_JOBS stored the job's first message
	// (RFC 3339 with nanoseconds): a job's wait counts from its publish,
	// not its admission.
	HeaderPublished = "Sluice-Published"
)

// ClassSubject is the subject of the class queue of kind, priority and
// tenant: sluice.jobs.<kind>.q.<priority>.<tenant>.
func ClassSubject(kind string, priority int, tenant string) string {
	return JobSubject(kind) + "." + classToken + "." + strconv.Itoa(priority) + "." + tenant
}

// ClassesFilter is the subject filter of every class queue of kind.
func ClassesFilter(kind string) string { return JobSubject(kind) + "." + classToken + ".>" }

// ClassConsumerName is the durable pull consumer of a class queue:
// sluice-<kind>-q<priority>-<tenant>.
func ClassConsumerName(kind string, priority int, tenant string) string {
	return ConsumerName(kind) + "-" + classToken + strconv.Itoa(priority) + "-" + tenant
}

// Class is the kind, priority and tenant of a class queue.
type Class struct {
	Kind     string
	Priority int
	Tenant   string
}

// ParseClassSubject returns the class of a class-queue subject; ok is
// false for any other subject, or one whose kind is not one of Kinds,
// whose priority is not 1 to 5 or whose tenant is empty.
func ParseClassSubject(subject string) (c Class, ok bool) {
	rest, ok := strings.CutPrefix(subject, JobsSubjectPrefix)
	if !ok {
		return Class{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 || parts[1] != classToken || parts[3] == "" || !slices.Contains(Kinds, parts[0]) {
		return Class{}, false
	}
	p, err := strconv.Atoi(parts[2])
	if err != nil || p < 1 || p > 5 || parts[2] != strconv.Itoa(p) {
		return Class{}, false
	}
	return Class{Kind: parts[0], Priority: p, Tenant: parts[3]}, true
}

// MessageID is the id a job message names for its job besides its spec's
// id: Sluice-Job-Id on a class-queue message (the id the admission
// resolved), else Nats-Msg-Id.
func MessageID(subject string, h nats.Header) string {
	if _, ok := ParseClassSubject(subject); ok {
		if id := h.Get(HeaderJobID); id != "" {
			return id
		}
	}
	return h.Get(HeaderMsgID)
}
