package jobclient

import (
	"context"

	"github.com/sluice-dev/sluice/internal/webhooks"
)

// Webhooks opens the webhook subscriptions and delivery records a worker
// has set up (docs/webhooks.md).
func (c *Client) Webhooks(ctx context.Context) (*webhooks.Store, error) {
	return webhooks.Open(ctx, c.js)
}

// ReplayWebhook sends the webhook delivery id again, with its webhook-id.
func (c *Client) ReplayWebhook(ctx context.Context, st *webhooks.Store, id string) (webhooks.Delivery, error) {
	return webhooks.Replay(ctx, c.js, st, id, c.now())
}
