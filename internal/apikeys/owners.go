package apikeys

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Owner records which tenant a job submitted over HTTP belongs to, and
// whether its publish was acknowledged. Like the job's own record it
// expires (Store.WithRecordTTL): after that the id is free again.
type Owner struct {
	// Tenant is the job's tenant; Key the id of the key that submitted it.
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
	// Published is true once SLUICE_JOBS acknowledged the job's message: a
	// repeated submit of an owner without it publishes again (the stream
	// deduplicates by job id), so a crash between the claim and the
	// publish loses no job. It is read from the job's published mark;
	// claims written by earlier versions carry it themselves.
	Published bool      `json:"published"`
	Created   time.Time `json:"created"`
	// revision is the entry's, which the published mark names.
	revision uint64
}

// ErrOwnedElsewhere: the job id belongs to another tenant.
var ErrOwnedElsewhere = errors.New("job id is taken by another tenant")

// Claim records that job id belongs to tenant, submitted with key. When
// the id is already claimed it returns that claim with existed set, or
// ErrOwnedElsewhere when it is another tenant's. Claiming twice for the
// same tenant (a lost answer, a repeated submit) is the same claim.
func (s *Store) Claim(ctx context.Context, id, tenant, key string) (o Owner, existed bool, err error) {
	o = Owner{Tenant: tenant, Key: key, Created: s.now().UTC()}
	data, err := json.Marshal(o)
	if err != nil {
		return Owner{}, false, err
	}
	// Twice: a claim seen taken may expire or be released before it is read.
	for range 2 {
		o.revision, err = s.createExpiring(ctx, ownerPrefix+id, data)
		if err == nil {
			return o, false, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return Owner{}, false, fmt.Errorf("claim job %s: %w", id, err)
		}
		cur, err := s.OwnerOf(ctx, id)
		if err != nil {
			return Owner{}, false, err
		}
		if cur != nil && cur.Tenant != tenant {
			break
		}
		if cur != nil {
			return *cur, true, nil
		}
	}
	return Owner{}, false, fmt.Errorf("%w: %s", ErrOwnedElsewhere, id)
}

// MarkPublished records that job id's claim o, which Claim or OwnerOf
// returned, was published: a record of its own, written once with the
// claim's lifetime (an update could not set one), naming o's revision. A
// mark naming another revision is an earlier claim's of the same id,
// whose owner expired before it, and is replaced.
func (s *Store) MarkPublished(ctx context.Context, id string, o Owner) error {
	if o.Published {
		return nil
	}
	name, mark := pubPrefix+id, []byte(strconv.FormatUint(o.revision, 10))
	for range 3 {
		_, err := s.createExpiring(ctx, name, mark)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("mark %s published: %w", id, err)
		}
		e, err := s.kv.Get(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue // expired meanwhile
		case err != nil:
			return fmt.Errorf("mark %s published: %w", id, err)
		case bytes.Equal(e.Value(), mark):
			return nil // another request marked it
		}
		if err := s.remove(ctx, name, e.Revision()); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("mark %s published: %w", id, err)
		}
	}
	return fmt.Errorf("mark %s published: its mark keeps changing", id)
}

// Release deletes job id's claim o, which Claim returned, unless it
// changed meanwhile: the id proved to be another tenant's.
func (s *Store) Release(ctx context.Context, id string, o Owner) error {
	if err := s.remove(ctx, ownerPrefix+id, o.revision); err != nil {
		return fmt.Errorf("release job %s: %w", id, err)
	}
	return nil
}

// remove deletes record name if its revision is still rev. With a record
// lifetime, the marker left behind expires too.
func (s *Store) remove(ctx context.Context, name string, rev uint64) error {
	if s.ttl <= 0 {
		return s.kv.Delete(ctx, name, jetstream.LastRevision(rev))
	}
	return s.kv.Purge(ctx, name, jetstream.LastRevision(rev), jetstream.PurgeTTL(s.ttl))
}

// OwnerOf returns job id's owner, or nil when no key submitted it or its
// claim expired.
func (s *Store) OwnerOf(ctx context.Context, id string) (*Owner, error) {
	var o Owner
	var err error
	o.revision, err = s.read(ctx, ownerPrefix+id, &o)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if o.Published {
		return &o, nil // a claim of an earlier version
	}
	e, err := s.kv.Get(ctx, pubPrefix+id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return nil, fmt.Errorf("read %s%s: %w", pubPrefix, id, err)
	default:
		o.Published = string(e.Value()) == strconv.FormatUint(o.revision, 10)
	}
	return &o, nil
}

// Idempotent binds the Idempotency-Key idem of tenant to job id and
// returns the job id bound to it: id on the first call, the first call's
// id on every later one until the binding expires with the job's owner.
// It is the tenant's, not a key's: a client that repeats a submit after
// its key was rotated gets the same job. The bucket stores a hash of
// tenant and idem, never idem itself.
func (s *Store) Idempotent(ctx context.Context, tenant, idem, id string) (string, error) {
	sum := sha256.Sum256([]byte(tenant + "\x00" + idem))
	name := idemPrefix + hex.EncodeToString(sum[:16])
	// Twice: a binding seen taken may expire before it is read.
	for range 2 {
		_, err := s.createExpiring(ctx, name, []byte(id))
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", fmt.Errorf("record idempotency key: %w", err)
		}
		e, err := s.kv.Get(ctx, name)
		if err == nil {
			return string(e.Value()), nil
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return "", fmt.Errorf("read idempotency key: %w", err)
		}
	}
	return "", fmt.Errorf("record idempotency key: it expires as it is written")
}
