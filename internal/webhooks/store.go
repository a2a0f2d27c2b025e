package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/kvcas"
)

// Key prefixes of SLUICE_WEBHOOKS.
const (
	subPrefix      = "sub."
	deliveryPrefix = "dlv."
)

// ErrNotFound is returned for a subscription or delivery that does not
// exist.
var ErrNotFound = errors.New("not found")

// Store reads and writes SLUICE_WEBHOOKS.
type Store struct {
	kv   jetstream.KeyValue
	recs jetstream.KeyValue
	subs *kvcas.Doc[Subscription]
	dlvs *kvcas.Doc[Delivery]
}

// NewStore returns a Store over the subscriptions bucket kv and the
// delivery records bucket recs.
func NewStore(kv, recs jetstream.KeyValue) *Store {
	return &Store{
		kv:   kv,
		recs: recs,
		subs: kvcas.New(kvcas.Doc[Subscription]{KV: kv, Name: "webhook subscription", WriteID: func(s *Subscription) *string { return &s.WriteID }}),
		dlvs: kvcas.New(kvcas.Doc[Delivery]{KV: recs, Name: "webhook delivery", WriteID: func(d *Delivery) *string { return &d.WriteID }}),
	}
}

// Add stores a new subscription with a new id and secret and returns it
// (the only time its secret is shown).
func (s *Store) Add(ctx context.Context, sub Subscription, now time.Time) (Subscription, error) {
	sub.ID, sub.Secret, sub.Created = newID(), NewSecret(), now.UTC()
	e, err := s.subs.Update(ctx, subPrefix+sub.ID, nil, func(_ Subscription, found bool) (Subscription, error) {
		if found {
			return sub, fmt.Errorf("subscription %s exists", sub.ID)
		}
		return sub, nil
	})
	return e.Value, err
}

// Get returns the subscription id.
func (s *Store) Get(ctx context.Context, id string) (Subscription, error) {
	e, err := s.kv.Get(ctx, subPrefix+id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Subscription{}, fmt.Errorf("subscription %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Subscription{}, fmt.Errorf("read subscription %s: %w", id, err)
	}
	var sub Subscription
	if err := json.Unmarshal(e.Value(), &sub); err != nil {
		return Subscription{}, fmt.Errorf("subscription %s: %w", id, err)
	}
	return sub, nil
}

// List returns every subscription and notify secret, by id.
func (s *Store) List(ctx context.Context) ([]Subscription, error) {
	var out []Subscription
	err := s.each(ctx, s.kv, subPrefix, func(v []byte) error {
		var sub Subscription
		if err := json.Unmarshal(v, &sub); err != nil {
			return err
		}
		out = append(out, sub)
		return nil
	})
	slices.SortFunc(out, func(a, b Subscription) int { return strings.Compare(a.ID, b.ID) })
	return out, err
}

// each calls f with the value of every key under prefix.
func (s *Store) each(ctx context.Context, kv jetstream.KeyValue, prefix string, f func([]byte) error) error {
	lister, err := kv.ListKeysFiltered(ctx, prefix+">")
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	defer func() { _ = lister.Stop() }()
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		if err := f(e.Value()); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	return nil
}

// Remove deletes the subscription id; its pending deliveries are dropped
// when they come up.
func (s *Store) Remove(ctx context.Context, id string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	return s.kv.Delete(ctx, subPrefix+id)
}

// Rotate gives subscription id a new secret; the old one goes on signing
// too (a second signature) for overlap, and the new one is returned.
func (s *Store) Rotate(ctx context.Context, id string, overlap time.Duration, now time.Time) (Subscription, error) {
	fresh := NewSecret()
	e, err := s.subs.Update(ctx, subPrefix+id, nil, func(cur Subscription, found bool) (Subscription, error) {
		if !found {
			return cur, fmt.Errorf("subscription %s: %w", id, ErrNotFound)
		}
		cur.PrevSecret, cur.PrevUntil, cur.Secret = cur.Secret, now.Add(overlap).UTC(), fresh
		return cur, nil
	})
	return e.Value, err
}

// Disable marks subscription id disabled, saying why.
func (s *Store) Disable(ctx context.Context, id, why string) error {
	_, err := s.subs.Update(ctx, subPrefix+id, nil, func(cur Subscription, found bool) (Subscription, error) {
		if !found || cur.Disabled != "" {
			return cur, kvcas.Unchanged
		}
		cur.Disabled = why
		return cur, nil
	})
	return err
}

// NotifySecret returns tenant's notify secret, creating it on first use.
func (s *Store) NotifySecret(ctx context.Context, tenant string, now time.Time) (Subscription, error) {
	e, err := s.subs.Update(ctx, subPrefix+NotifyID(tenant), nil, func(cur Subscription, found bool) (Subscription, error) {
		if found {
			return cur, kvcas.Unchanged
		}
		return Subscription{ID: NotifyID(tenant), Tenant: tenant, Notify: true, Secret: NewSecret(), Created: now.UTC()}, nil
	})
	return e.Value, err
}

// Cache keeps every subscription in memory, current through a watch of
// the bucket, for the dispatcher that matches each event against all.
type Cache struct {
	mu    sync.RWMutex
	subs  map[string]Subscription
	ready chan struct{}
}

// WatchSubscriptions starts a Cache that follows the bucket until ctx
// ends; it returns once the Cache holds every stored subscription.
func (s *Store) WatchSubscriptions(ctx context.Context) (*Cache, error) {
	w, err := s.kv.Watch(ctx, subPrefix+">")
	if err != nil {
		return nil, fmt.Errorf("watch subscriptions: %w", err)
	}
	c := &Cache{subs: map[string]Subscription{}, ready: make(chan struct{})}
	go c.follow(ctx, w)
	select {
	case <-c.ready:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Cache) follow(ctx context.Context, w jetstream.KeyWatcher) {
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			c.apply(e)
		}
	}
}

func (c *Cache) apply(e jetstream.KeyValueEntry) {
	if e == nil { // the initial values are all in
		close(c.ready)
		return
	}
	id := strings.TrimPrefix(e.Key(), subPrefix)
	var sub Subscription
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &sub) != nil {
		delete(c.subs, id)
		return
	}
	c.subs[id] = sub
}

// Get returns the subscription id as last seen.
func (c *Cache) Get(id string) (Subscription, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	sub, ok := c.subs[id]
	return sub, ok
}

// Matching returns the subscriptions that want an event.
func (c *Cache) Matching(kind, status, tenant string, labels map[string]string) []Subscription {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []Subscription
	for _, sub := range c.subs {
		if sub.Matches(kind, status, tenant, labels) {
			out = append(out, sub)
		}
	}
	slices.SortFunc(out, func(a, b Subscription) int { return strings.Compare(a.ID, b.ID) })
	return out
}
