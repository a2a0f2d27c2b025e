package jobclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	// Held counts those a worker took and has not acknowledged: running,
	// or waiting in the worker for budget or a retry.
	Held uint64 `json:"held"`
}

// NotStarted counts the class queue's jobs no worker has taken yet.
func (c ClassWaiting) NotStarted() uint64 { return c.Messages - c.Held }

// WaitingByClass returns every class queue of SLUICE_JOBS that holds
// messages, from one stream info filtered on sluice.jobs.>, by tenant,
// priority (most urgent first) and kind, and one consumer info per queue
// for the messages its workers hold. None when the stream does not exist
// yet.
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
	classes := classesOfSubjects(info.State.Subjects)
	for i, cl := range classes {
		pending, err := c.classPending(ctx, s, cl)
		if err != nil {
			return nil, err
		}
		classes[i].Held = cl.Messages - min(pending, cl.Messages)
	}
	return classes, nil
}

// classPending counts the messages of cl's queue its consumer has not
// delivered yet: all of them when no worker has served the queue.
func (c *Client) classPending(ctx context.Context, s jetstream.Stream, cl ClassWaiting) (uint64, error) {
	name := contract.ClassConsumerName(cl.Kind, cl.Priority, cl.Tenant)
	cons, err := s.Consumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return cl.Messages, nil
	}
	if err != nil {
		return 0, c.jsErr(fmt.Errorf("consumer %s: %w", name, err))
	}
	return cons.CachedInfo().NumPending, nil
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
