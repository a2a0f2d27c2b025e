package jobclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/internal/state"
)

// Status returns the job recorded under id in SLUICE_STATE. It returns an
// error wrapping ErrNoSuchJob when there is no record, and one wrapping
// ErrNotSetUp when the bucket does not exist.
func (c *Client) Status(ctx context.Context, id string) (*Job, error) {
	rec, err := c.record(ctx, id)
	if err != nil {
		return nil, err
	}
	j := JobFromRecord(rec)
	return &j, nil
}

// record reads job id's state record; see Status for the errors.
func (c *Client) record(ctx context.Context, id string) (*state.Record, error) {
	store, err := c.stateStore(ctx, false)
	if err != nil {
		return nil, err
	}
	rec, _, err := store.Get(ctx, id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoSuchJob, id)
	}
	if err != nil {
		return nil, c.jsErr(err)
	}
	return rec, nil
}
