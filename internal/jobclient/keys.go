package jobclient

import (
	"context"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/contract"
)

// APIKeys opens the HTTP API's keys in SLUICE_KEYS. With create it
// creates the bucket when it is missing (enqueue keys create may run
// before any worker); otherwise a missing bucket is ErrNotSetUp.
func (c *Client) APIKeys(ctx context.Context, create bool) (*apikeys.Store, error) {
	kv, err := c.bucket(ctx, contract.KeysBucketConfig(contract.Options{}), create)
	if err != nil {
		return nil, err
	}
	return apikeys.NewStore(kv, c.now), nil
}
