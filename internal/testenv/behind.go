package testenv

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Behind returns kv, a real bucket, with reads that come from a replica
// that stopped applying writes: every Get of a key answers the first value
// it read of that key. On a cluster a follower stuck or far behind (after a
// restart) answers the direct gets of the clients on its server that way.
// Writes, and every other operation, go to kv.
func Behind(kv jetstream.KeyValue) jetstream.KeyValue {
	return &behindKV{KeyValue: kv, first: map[string]jetstream.KeyValueEntry{}}
}

type behindKV struct {
	jetstream.KeyValue
	mu    sync.Mutex
	first map[string]jetstream.KeyValueEntry
}

func (kv *behindKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if e, ok := kv.first[key]; ok {
		return e, nil
	}
	e, err := kv.KeyValue.Get(ctx, key)
	if err == nil {
		kv.first[key] = e
	}
	return e, err
}
