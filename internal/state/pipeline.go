package state

import (
	"context"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// The statuses of a pipeline's step besides a job's own (docs/pipelines.md):
// a step is waiting until the pipeline publishes it, queued from then until
// its job ends, then at its job's terminal status; skipped when it will not
// run. (Where a queued step's job is meanwhile is in the job's record.)
const (
	StepWaiting Status = "waiting"
	StepQueued  Status = "queued"
	StepSkipped Status = "skipped"
)

// Pipeline is what a pipeline's record keeps of its steps.
type Pipeline struct {
	// Steps are the pipeline's steps in the spec's order.
	Steps []PipelineStep `json:"steps"`
}

// PipelineStep is one step of a pipeline as its record and its events
// show it.
type PipelineStep struct {
	Name string `json:"name"`
	// JobID is the step's job: <pipeline id>--<name>, or for a step a
	// retry reuses, the job of the earlier run whose result it takes.
	JobID  string `json:"job_id"`
	Status Status `json:"status"`
	// Reused: a retry of the pipeline took this step's result from the
	// run it retries instead of running it again.
	Reused bool `json:"reused,omitempty"`
	// Artifacts are the step's artifacts once it succeeded.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Error is the step's error once it failed.
	Error *Error `json:"error,omitempty"`
	// CancelSent: the pipeline asked for the step's cancel.
	CancelSent bool `json:"cancel_sent,omitempty"`
}

// Ended reports whether the step will not change any more.
func (s *PipelineStep) Ended() bool { return s.Status == StepSkipped || s.Status.Terminal() }

// clone returns a copy of p that shares nothing mutable with it.
func (p *Pipeline) clone() *Pipeline {
	if p == nil {
		return nil
	}
	c := &Pipeline{Steps: slices.Clone(p.Steps)}
	for i := range c.Steps {
		c.Steps[i].Artifacts = slices.Clone(c.Steps[i].Artifacts)
		c.Steps[i].Error = clonePtr(c.Steps[i].Error)
	}
	return c
}

// Changes collects the keys a watch (Store.Watch) saw written.
type Changes struct {
	// C receives, without blocking the watch, after each write: several
	// writes may make one receive.
	C chan struct{}

	mu   sync.Mutex
	keys map[string]bool
	// lost: the watch ended before its context did (its subscription
	// lost); Take then says every key may have changed.
	lost bool
}

// Take returns the keys written since the last Take (empty when none)
// and forgets them; nil when the watch was lost, meaning any key may have
// been written.
func (c *Changes) Take() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost {
		return nil
	}
	keys := c.keys
	c.keys = map[string]bool{}
	return keys
}

// Watch watches the records of ids from now on, until ctx ends: every
// write of one puts its key in the returned Changes. A pipeline waits on
// it for its steps.
func (s *Store) Watch(ctx context.Context, ids []string) (*Changes, error) {
	// WatchFiltered turns the keys it is given into subjects in place.
	w, err := s.kv.WatchFiltered(ctx, slices.Clone(ids), jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	c := &Changes{C: make(chan struct{}, 1), keys: map[string]bool{}}
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					c.mu.Lock()
					c.lost = true
					c.mu.Unlock()
					return
				}
				if e == nil {
					continue
				}
				c.mu.Lock()
				c.keys[e.Key()] = true
				c.mu.Unlock()
				select {
				case c.C <- struct{}{}:
				default:
				}
			}
		}
	}()
	return c, nil
}
