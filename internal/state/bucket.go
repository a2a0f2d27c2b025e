package state

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/natsconn"
)

// bucket is a key-value bucket that Store and Specs write with
// compare-and-set.
type bucket struct {
	kv jetstream.KeyValue
	// nc, when set (Direct), carries the writes with natsconn.Publish
	// instead of kv's Create and Update.
	nc      *nats.Conn
	subject string
}

// Direct sends the writes over nc, the connection the bucket's
// jetstream.KeyValue uses, with natsconn.Publish: the same compare-and-set
// as the KeyValue's Update and Create, without nats.go's decoding of every
// acknowledgement with encoding/json. A create that meets an existing key
// still goes through the KeyValue's Create, which also takes the place of
// a deleted key.
func (b *bucket) Direct(nc *nats.Conn) {
	b.nc, b.subject = nc, "$KV."+b.kv.Bucket()+"."
}

// get returns key's value and revision, or an error matching
// jetstream.ErrKeyNotFound. With leader, and a connection (Direct), it
// reads from the bucket's stream leader rather than whichever replica
// answers first: after a write lost to a conflict, the read before it
// may have come from a replica behind the last writes, which would fail
// every retry alike (natsconn.KVRead).
func (b *bucket) get(ctx context.Context, key string, leader bool) ([]byte, uint64, error) {
	return natsconn.KVRead(ctx, b.kv, b.nc, key, leader && validKey(key))
}

// write stores data under key if the key's revision is still rev (0: if
// it has none), and returns the new revision. A conflict is an error
// matching jetstream.ErrKeyExists.
func (b *bucket) write(ctx context.Context, key string, data []byte, rev uint64) (uint64, error) {
	if b.nc == nil || !validKey(key) {
		if rev == 0 {
			return b.kv.Create(ctx, key, data)
		}
		return b.kv.Update(ctx, key, data, rev)
	}
	m := &nats.Msg{Subject: b.subject + key, Header: nats.Header{}, Data: data}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	n, err := natsconn.Publish(ctx, b.nc, m)
	if rev == 0 && errors.Is(err, jetstream.ErrKeyExists) {
		return b.kv.Create(ctx, key, data)
	}
	return n, err
}

// validKey reports whether key is one nats.go's KeyValue accepts (job ids
// always are: jobspec allows fewer characters); others go to the
// KeyValue, which refuses them.
func validKey(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return false
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '/', c == '=', c == '.':
		default:
			return false
		}
	}
	return true
}
