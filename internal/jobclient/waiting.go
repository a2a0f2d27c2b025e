package jobclient

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobqueue"
	"github.com/sluice-dev/sluice/internal/state"
)

// addTenantWaiting adds to jobs the jobs of o.Tenant that have no event
// yet: the messages in the tenant's class queues of SLUICE_JOBS (queued,
// or received and waiting, e.g. for budget), each as its record shows it
// when a worker wrote one. Only the tenant's class queues are read, one
// request a message, at most o.Limit of them when o.Limit is positive.
func (c *Client) addTenantWaiting(ctx context.Context, jobs map[string]*Job, o ListOptions) error {
	classes, err := c.WaitingByClass(ctx)
	if err != nil {
		return err
	}
	stream, err := c.js.Stream(ctx, contract.JobsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return c.jsErr(err)
	}
	store, err := c.stateStore(ctx, false)
	if err != nil && !errors.Is(err, ErrNotSetUp) {
		return err
	}
	var queued []*Job
	added := 0
	for _, cl := range classes {
		if cl.Tenant != o.Tenant || (o.Kind != "" && cl.Kind != string(o.Kind)) {
			continue
		}
		subject := contract.ClassSubject(cl.Kind, cl.Priority, cl.Tenant)
		for seq := uint64(1); o.Limit <= 0 || added < o.Limit; added++ {
			raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				break
			}
			if err != nil {
				return c.jsErr(err)
			}
			seq = raw.Sequence + 1
			j := c.waitingJob(ctx, store, raw)
			if _, seen := jobs[j.ID]; !seen {
				jobs[j.ID] = j
				queued = append(queued, j)
			}
		}
	}
	return c.markBudgetWait(ctx, queued)
}

// TenantWaiting returns tenant's jobs that have no event yet, at most
// limit of them (all when limit is 0 or less), read as addTenantWaiting
// reads them; WaitingFor says which wait for budget.
func (c *Client) TenantWaiting(ctx context.Context, tenant string, limit int) ([]Job, error) {
	jobs := map[string]*Job{}
	if err := c.addTenantWaiting(ctx, jobs, ListOptions{Tenant: tenant, Limit: limit}); err != nil {
		return nil, err
	}
	out := make([]Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, *j)
	}
	return out, nil
}

// waitingJob is the Job of a message in SLUICE_JOBS: as its record shows
// it when a worker wrote one (store may be nil), else queued.
func (c *Client) waitingJob(ctx context.Context, store *state.Store, raw *jetstream.RawStreamMsg) *Job {
	id := jobqueue.JobID(raw)
	var rec *state.Record
	if store != nil {
		rec, _, _ = store.Get(ctx, id)
	}
	if rec != nil && rec.Status != "" {
		j := JobFromRecord(rec)
		return &j
	}
	w := &jobqueue.Waiting{JobID: id, Kind: contract.KindOfMessage(raw.Subject, raw.Data), Subject: raw.Subject, Seq: raw.Sequence, Published: raw.Time}
	j := queuedJob(w, rec)
	j.UpdatedAt = j.CreatedAt
	return j
}
