package natsconn

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// KVGetFromLeader reads what the bucket's Get reads, with its revision,
// and a key never written, deleted or purged as not found.
func TestKVGetFromLeaderReadsAsGetDoes(t *testing.T) {
	n := testenv.StartNATS(t)
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := n.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "LEADER_TEST", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(what string) {
		t.Helper()
		if _, _, err := KVGetFromLeader(ctx, n.Conn, "LEADER_TEST", "k.1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("%s: err = %v, want ErrKeyNotFound", what, err)
		}
	}
	notFound("never written")
	for _, v := range []string{"one", "two"} {
		if _, err := kv.PutString(ctx, "k.1", v); err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(ctx, "k.1")
		if err != nil {
			t.Fatal(err)
		}
		got, rev, err := KVGetFromLeader(ctx, n.Conn, "LEADER_TEST", "k.1")
		if err != nil || string(got) != v || rev != e.Revision() {
			t.Errorf("read %q at %d (%v), want %q at %d", got, rev, err, v, e.Revision())
		}
	}
	if err := kv.Delete(ctx, "k.1"); err != nil {
		t.Fatal(err)
	}
	notFound("deleted")
	if _, err := kv.PutString(ctx, "k.1", "three"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "k.1"); err != nil {
		t.Fatal(err)
	}
	notFound("purged")
}

// KVRead falls back to the bucket's Get when the leader read fails (here:
// asked on a server where the bucket's stream does not exist, as no leader
// answers during an election), and reads as Get does.
func TestKVReadFallsBackToGet(t *testing.T) {
	n, other := testenv.StartNATS(t), testenv.StartNATS(t)
	ctx := testenv.Context(t, 10*time.Second)
	kv, err := n.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "LEADER_TEST", History: 1})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.PutString(ctx, "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := KVGetFromLeader(ctx, other.Conn, "LEADER_TEST", "k"); err == nil || errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the leader read on a server without the bucket: %v, want an error", err)
	}
	for _, nc := range []*nats.Conn{n.Conn, other.Conn, nil} {
		got, gotRev, err := KVRead(ctx, kv, nc, "k", true)
		if err != nil || string(got) != "v" || gotRev != rev {
			t.Errorf("KVRead = %q at %d (%v), want %q at %d", got, gotRev, err, "v", rev)
		}
	}
}
