package state

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoSpec is returned by Specs.Get for a job whose spec is not kept: it
// never reached a worker, or its SLUICE_STATE_TTL has passed.
var ErrNoSpec = errors.New("state: no spec kept for job")

// Specs keeps each job's spec, byte for byte as received, in the
// SLUICE_SPECS bucket under the job id, so that a retry needs only the id.
type Specs struct {
	bucket
}

// NewSpecs returns Specs over kv.
func NewSpecs(kv jetstream.KeyValue) *Specs { return &Specs{bucket{kv: kv}} }

// Keep stores data as jobID's spec unless one is kept already: the first
// spec received under an id is the one a retry runs again.
func (s *Specs) Keep(ctx context.Context, jobID string, data []byte) error {
	_, err := s.write(ctx, jobID, data, 0)
	if err == nil || errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	return fmt.Errorf("keep spec %s: %w", jobID, err)
}

// Get returns jobID's spec as received, or ErrNoSpec.
func (s *Specs) Get(ctx context.Context, jobID string) ([]byte, error) {
	e, err := s.kv.Get(ctx, jobID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w %s", ErrNoSpec, jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("get spec %s: %w", jobID, err)
	}
	return e.Value(), nil
}
