package jobclient

import (
	"context"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/contract"
)

// APIKeys opens the HTTP API's keys in SLUICE_KEYS. With create it
// creates the bucket when it is missing (enqueue keys create may run
// before any worker); otherwise a missing bucket is ErrNotSetUp. An
// existing bucket is opened as it is: its definition is the worker's
// setup's. Job owners and idempotency keys it writes live for the
// default SLUICE_STATE_TTL (the worker's API sets its own).
func (c *Client) APIKeys(ctx context.Context, create bool) (*apikeys.Store, error) {
	kv, err := c.bucket(ctx, contract.KeysBucketConfig(contract.Options{}), create)
	if err != nil {
		return nil, err
	}
	return apikeys.NewStore(kv, c.now).WithRecordTTL(contract.DefaultStateTTL), nil
}
