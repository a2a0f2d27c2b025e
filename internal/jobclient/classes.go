package jobclient

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
)

// ClassWaiting counts the job messages in one class queue of SLUICE_JOBS,
// sluice.jobs.<kind>.q.<priority>.<tenant>, which holds a tenant's jobs
// of one kind and priority while fair scheduling is on
// (docs/lifecycle.md): admitted and not yet started,
// held by a worker, or waiting for a retry.
type ClassWaiting struct {
	Kind     string `json:"kind"`
	Priority int    `json:"priority"`
	Tenant   string `json:"tenant"`
	Messages uint64 `json:"messages"`
}

// WaitingByClass returns every class queue of SLUICE_JOBS that holds
// messages, from one stream info filtered on sluice.jobs.>, by tenant,
// priority (most urgent first) and kind. None when the stream does not
// exist yet.
func (c *Client) WaitingByClass(ctx context.Context) ([]ClassWaiting, error) {
	s, err := c.js.Stream(ctx, contract.JobsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, c.jsErr(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(contract.JobsSubjectPrefix+">"))
	if err != nil {
		return nil, c.jsErr(err)
	}
	return classesOfSubjects(info.State.Subjects), nil
}

// classesOfSubjects keeps the class queues among a stream's subject
// counts, sorted by tenant, priority and kind.
func classesOfSubjects(counts map[string]uint64) []ClassWaiting {
	var out []ClassWaiting
	for subject, n := range counts {
		if cl, ok := classOfSubject(subject); ok && n > 0 {
			cl.Messages = n
			out = append(out, cl)
		}
	}
	slices.SortFunc(out, func(a, b ClassWaiting) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Priority, b.Priority),
			cmp.Compare(slices.Index(contract.Kinds, a.Kind), slices.Index(contract.Kinds, b.Kind)))
	})
	return out
}

// classOfSubject parses sluice.jobs.<kind>.q.<priority>.<tenant>; ok is
// false for any other subject (a kind's own subject, an unknown kind, a
// priority that is not 1 to 5 written plainly, an empty tenant).
func classOfSubject(subject string) (ClassWaiting, bool) {
	rest, ok := strings.CutPrefix(subject, contract.JobsSubjectPrefix)
	if !ok {
		return ClassWaiting{}, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 4 || parts[1] != "q" || parts[3] == "" || !slices.Contains(contract.Kinds, parts[0]) {
		return ClassWaiting{}, false
	}
	p, err := strconv.Atoi(parts[2])
	if err != nil || p < 1 || p > 5 || parts[2] != strconv.Itoa(p) {
		return ClassWaiting{}, false
	}
	return ClassWaiting{Kind: parts[0], Priority: p, Tenant: parts[3]}, true
}
