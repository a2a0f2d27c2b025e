package apikeys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Owner records which tenant a job submitted over HTTP belongs to, and
// whether its publish was acknowledged.
type Owner struct {
	// Tenant is the job's tenant; Key the id of the key that submitted it.
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
	// Published is set once SLUICE_JOBS acknowledged the job's message: a
	// repeated submit of an owner without it publishes again (the stream
	// deduplicates by job id), so a crash between the claim and the
	// publish loses no job.
	Published bool      `json:"published"`
	Created   time.Time `json:"created"`
	// revision is the entry's, for MarkPublished.
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
	o.revision, err = s.kv.Create(ctx, ownerPrefix+id, data)
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
	if cur == nil || cur.Tenant != tenant {
		return Owner{}, false, fmt.Errorf("%w: %s", ErrOwnedElsewhere, id)
	}
	return *cur, true, nil
}

// MarkPublished sets Published on job id's claim o, which Claim or
// OwnerOf returned. A claim changed meanwhile is read again.
func (s *Store) MarkPublished(ctx context.Context, id string, o Owner) error {
	if o.Published {
		return nil
	}
	o.Published = true
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = s.kv.Update(ctx, ownerPrefix+id, data, o.revision)
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Another request marked it, or o was stale: read and retry once.
		cur, rerr := s.OwnerOf(ctx, id)
		if rerr != nil || cur == nil || cur.Published {
			return rerr
		}
		cur.Published = true
		if data, err = json.Marshal(cur); err != nil {
			return err
		}
		_, err = s.kv.Update(ctx, ownerPrefix+id, data, cur.revision)
	}
	if err != nil {
		return fmt.Errorf("mark %s published: %w", id, err)
	}
	return nil
}

// Release deletes job id's claim o, which Claim returned, unless it
// changed meanwhile: the id proved to be another tenant's.
func (s *Store) Release(ctx context.Context, id string, o Owner) error {
	if err := s.kv.Delete(ctx, ownerPrefix+id, jetstream.LastRevision(o.revision)); err != nil {
		return fmt.Errorf("release job %s: %w", id, err)
	}
	return nil
}

// OwnerOf returns job id's owner, or nil when no key submitted it.
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
	return &o, nil
}

// Idempotent binds the Idempotency-Key idem of tenant to job id and
// returns the job id bound to it: id on the first call, the first call's
// id on every later one. It is the tenant's, not a key's: a client that
// repeats a submit after its key was rotated gets the same job. The
// bucket stores a hash of tenant and idem, never idem itself.
func (s *Store) Idempotent(ctx context.Context, tenant, idem, id string) (string, error) {
	sum := sha256.Sum256([]byte(tenant + "\x00" + idem))
	name := idemPrefix + hex.EncodeToString(sum[:16])
	_, err := s.kv.Create(ctx, name, []byte(id))
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", fmt.Errorf("record idempotency key: %w", err)
	}
	e, err := s.kv.Get(ctx, name)
	if err != nil {
		return "", fmt.Errorf("read idempotency key: %w", err)
	}
	return string(e.Value()), nil
}
