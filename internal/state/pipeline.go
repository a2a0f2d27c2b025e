package state

import (
	"context"
	"slices"

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

// Watch returns a channel that receives (without blocking the sender, so
// several writes may make one receive) after each write of the records of
// ids from now on, until ctx ends. A pipeline waits on it for its steps.
func (s *Store) Watch(ctx context.Context, ids []string) (<-chan struct{}, error) {
	// WatchFiltered turns the keys it is given into subjects in place.
	w, err := s.kv.WatchFiltered(ctx, slices.Clone(ids), jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return nil, err
	}
	out := make(chan struct{}, 1)
	go func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					continue
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out, nil
}
