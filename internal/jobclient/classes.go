package jobclient

import (
	"cmp"
	"context"
	"errors"
	"slices"
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
		if cl, ok := contract.ParseClassSubject(subject); ok && n > 0 {
			out = append(out, ClassWaiting{Kind: cl.Kind, Priority: cl.Priority, Tenant: cl.Tenant, Messages: n})
		}
	}
	slices.SortFunc(out, func(a, b ClassWaiting) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Priority, b.Priority),
			cmp.Compare(slices.Index(contract.Kinds, a.Kind), slices.Index(contract.Kinds, b.Kind)))
	})
	return out
}
