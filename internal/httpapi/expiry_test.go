package httpapi_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/apikeys"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/jobclient"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestOwnerAndIdempotencyRecordsExpire: on a SLUICE_KEYS bucket made by
// the previous build, setup turns on per-key expiry in place (once: a
// second run and `enqueue keys` change nothing); an owner, its published
// mark and an idempotency key then go after the store's record lifetime,
// while the API key still authenticates and a claim of the previous build
// (no lifetime, published in the claim itself) still reads published.
func TestOwnerAndIdempotencyRecordsExpire(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	env := testenv.StartNATS(t)
	old := contract.KeysBucketConfig(contract.Options{})
	old.LimitMarkerTTL = 0
	kv, err := env.JS.CreateKeyValue(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "job.legacy-1", []byte(`{"tenant":"acme","key":"k","published":true}`)); err != nil {
		t.Fatal(err)
	}
	cfg := ensureKeysBucket(ctx, t, env.JS)
	if cfg.SubjectDeleteMarkerTTL == 0 || !cfg.AllowMsgTTL {
		t.Fatalf("SLUICE_KEYS after setup: %+v, want per-key expiry", cfg)
	}
	if again := ensureKeysBucket(ctx, t, env.JS); !reflect.DeepEqual(again, cfg) {
		t.Errorf("a second setup changed SLUICE_KEYS:\n%+v\nwant\n%+v", again, cfg)
	}
	store := openKeys(ctx, t, env.URL).WithRecordTTL(2 * time.Second)
	if now := keysConfig(ctx, t, env.JS); !reflect.DeepEqual(now, cfg) {
		t.Errorf("enqueue keys changed SLUICE_KEYS:\n%+v\nwant\n%+v", now, cfg)
	}
	token, key, err := store.Create(ctx, apikeys.Key{Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := store.Idempotent(ctx, "acme", "order-1", "clip-a"); err != nil || id != "clip-a" {
		t.Fatalf("Idempotent = %q, %v", id, err)
	}
	owner, _, err := store.Claim(ctx, "clip-a", "acme", key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.MarkPublished(ctx, "clip-a", owner); err != nil {
		t.Fatal(err)
	}
	if o, err := store.OwnerOf(ctx, "clip-a"); err != nil || o == nil || !o.Published {
		t.Fatalf("owner of clip-a = %+v, %v; want published", o, err)
	}
	waitFor(ctx, t, "the owner and idempotency key of clip-a to expire", func() bool {
		o, err := store.OwnerOf(ctx, "clip-a")
		if err != nil || o != nil {
			return false
		}
		_, err = kv.Get(ctx, "pub.clip-a")
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	if id, err := store.Idempotent(ctx, "acme", "order-1", "clip-b"); err != nil || id != "clip-b" {
		t.Errorf("Idempotent after expiry = %q, %v; want the new id clip-b", id, err)
	}
	if _, err := store.Authenticate(ctx, token); err != nil {
		t.Errorf("the key after its records expired: %v", err)
	}
	if o, err := store.OwnerOf(ctx, "legacy-1"); err != nil || o == nil || o.Tenant != "acme" || !o.Published {
		t.Errorf("owner of the previous build = %+v, %v; want acme's, published", o, err)
	}
}

// TestStalePublishedMarkIgnored: a published mark left by an earlier
// claim of the same id (its owner expired first) does not count for a
// new claim, which is published and then marked.
func TestStalePublishedMarkIgnored(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t, time.Minute)
	env := testenv.StartNATS(t)
	ensureKeysBucket(ctx, t, env.JS)
	store := openKeys(ctx, t, env.URL)
	kv, err := env.JS.KeyValue(ctx, contract.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "pub.clip-s", []byte("999999")); err != nil {
		t.Fatal(err)
	}
	owner, existed, err := store.Claim(ctx, "clip-s", "acme", "k")
	if err != nil || existed || owner.Published {
		t.Fatalf("Claim = %+v, %v, %v; want a new unpublished claim", owner, existed, err)
	}
	if o, err := store.OwnerOf(ctx, "clip-s"); err != nil || o == nil || o.Published {
		t.Fatalf("owner = %+v, %v; want unpublished", o, err)
	}
	if err := store.MarkPublished(ctx, "clip-s", owner); err != nil {
		t.Fatal(err)
	}
	if o, err := store.OwnerOf(ctx, "clip-s"); err != nil || o == nil || !o.Published {
		t.Errorf("owner = %+v, %v; want published", o, err)
	}
}

// ensureKeysBucket runs the worker's setup and returns SLUICE_KEYS's
// stream configuration.
func ensureKeysBucket(ctx context.Context, t *testing.T, js jetstream.JetStream) jetstream.StreamConfig {
	t.Helper()
	if err := contract.Ensure(ctx, js, contract.Options{}); err != nil {
		t.Fatal(err)
	}
	return keysConfig(ctx, t, js)
}

func keysConfig(ctx context.Context, t *testing.T, js jetstream.JetStream) jetstream.StreamConfig {
	t.Helper()
	s, err := js.Stream(ctx, "KV_"+contract.KeysBucket)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().Config
}

// openKeys opens SLUICE_KEYS as `enqueue keys create` does.
func openKeys(ctx context.Context, t *testing.T, url string) *apikeys.Store {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	client, err := jobclient.New(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	store, err := client.APIKeys(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// waitFor polls cond until it holds, failing the test when ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
