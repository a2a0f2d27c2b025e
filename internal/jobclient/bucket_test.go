package jobclient_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// stateBucket starts an embedded NATS server with the contract's streams
// and buckets and returns it with a test context and the state bucket, in
// which a test leaves the records a worker would.
func stateBucket(t *testing.T) (*testenv.NATS, context.Context, jetstream.KeyValue) {
	t.Helper()
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 30*time.Second)
	if err := contract.Ensure(ctx, n.JS, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	kv, err := n.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	return n, ctx, kv
}
