// Package apikeys keeps the HTTP API's keys in the SLUICE_KEYS bucket:
// each key belongs to one tenant and is stored only as a hash of its
// secret, so that reading the bucket gives nobody a usable key. The same
// bucket records which tenant each job submitted over HTTP belongs to and
// the idempotency keys of those submits (docs/http-api.md).
package apikeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TokenPrefix starts every key, so that a leaked one is recognisable
// (secret scanners, logs): sluice_<id>_<secret>.
const TokenPrefix = "sluice_"

// The keys of the SLUICE_KEYS bucket. Only key.* records are kept until
// deleted; the others expire after the Store's record lifetime.
const (
	keyPrefix   = "key."
	ownerPrefix = "job."
	pubPrefix   = "pub."
	idemPrefix  = "idem."
)

// Errors of the Store.
var (
	// ErrUnauthorized: the token is malformed, unknown, wrong or revoked.
	// Which of these is never told to the caller.
	ErrUnauthorized = errors.New("missing, unknown or revoked API key")
	// ErrNoSuchKey: no key has this id.
	ErrNoSuchKey = errors.New("no such API key")
)

// Key is a key's record; it never holds the secret, only its hash.
type Key struct {
	// ID names the key in logs, metrics and `enqueue keys`.
	ID string `json:"id"`
	// Tenant is the one tenant the key acts for.
	Tenant string `json:"tenant"`
	// Kinds limits the kinds it may submit; empty means every kind.
	Kinds []string `json:"kinds,omitempty"`
	// MaxPriority is the most urgent priority it may ask (1-5); 0 means
	// any.
	MaxPriority int `json:"max_priority,omitempty"`
	// Rate is the requests per second it may make; 0 means no limit.
	Rate float64 `json:"rate,omitempty"`
	// Created is when it was created, Revoked when it was revoked.
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
	// Hash is the hex SHA-256 of the secret.
	Hash string `json:"hash"`
}

// AllowsKind reports whether the key may submit jobs of kind.
func (k *Key) AllowsKind(kind string) bool {
	return len(k.Kinds) == 0 || slices.Contains(k.Kinds, kind)
}

// Store reads and writes SLUICE_KEYS.
type Store struct {
	kv  jetstream.KeyValue
	now func() time.Time
	// ttl is the lifetime of the owner, published and idempotency
	// records it writes; 0 keeps them until deleted.
	ttl time.Duration
}

// NewStore returns a Store over the SLUICE_KEYS bucket kv that keeps
// every record it writes until deleted (see WithRecordTTL).
func NewStore(kv jetstream.KeyValue, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{kv: kv, now: now}
}

// WithRecordTTL returns a Store whose owner, published and idempotency
// records expire ttl after they are written (SLUICE_STATE_TTL, the job
// records' own lifetime); the API keys never expire. The bucket must
// allow per-key lifetimes (contract.KeysBucketConfig).
func (s *Store) WithRecordTTL(ttl time.Duration) *Store {
	c := *s
	c.ttl = ttl
	return &c
}

// createExpiring creates record name, which expires after the Store's
// record lifetime.
func (s *Store) createExpiring(ctx context.Context, name string, data []byte) (uint64, error) {
	if s.ttl <= 0 {
		return s.kv.Create(ctx, name, data)
	}
	return s.kv.Create(ctx, name, data, jetstream.KeyTTL(s.ttl))
}

// Create stores a new key with k's tenant, kinds, priority cap and rate
// and returns the token, which exists nowhere else: the bucket keeps its
// hash only.
func (s *Store) Create(ctx context.Context, k Key) (token string, _ Key, _ error) {
	var id [6]byte
	var secret [24]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", Key{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", Key{}, err
	}
	k.ID = hex.EncodeToString(id[:])
	sec := base64.RawURLEncoding.EncodeToString(secret[:])
	k.Hash, k.Created, k.Revoked = hashSecret(sec), s.now().UTC(), nil
	data, err := json.Marshal(k)
	if err != nil {
		return "", Key{}, err
	}
	if _, err := s.kv.Create(ctx, keyPrefix+k.ID, data); err != nil {
		return "", Key{}, fmt.Errorf("store key %s: %w", k.ID, err)
	}
	return TokenPrefix + k.ID + "_" + sec, k, nil
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Get returns key id's record, or ErrNoSuchKey.
func (s *Store) Get(ctx context.Context, id string) (*Key, error) {
	var k Key
	if _, err := s.read(ctx, keyPrefix+id, &k); err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNoSuchKey, id)
		}
		return nil, err
	}
	return &k, nil
}

// read decodes the JSON entry name into v and returns its revision; a
// missing entry is jetstream.ErrKeyNotFound.
func (s *Store) read(ctx context.Context, name string, v any) (uint64, error) {
	e, err := s.kv.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return e.Revision(), nil
}

// Authenticate returns the key of token, or an error wrapping
// ErrUnauthorized when the token is malformed, unknown, wrong or revoked.
// Other errors are the bucket's (the caller answers 503, not 401).
func (s *Store) Authenticate(ctx context.Context, token string) (*Key, error) {
	id, secret, ok := SplitToken(token)
	if !ok {
		return nil, ErrUnauthorized
	}
	k, err := s.Get(ctx, id)
	if errors.Is(err, ErrNoSuchKey) {
		return nil, ErrUnauthorized
	}
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(k.Hash)) != 1 || k.Revoked != nil {
		return nil, ErrUnauthorized
	}
	return k, nil
}

// SplitToken splits sluice_<id>_<secret> into its id and secret.
func SplitToken(token string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok {
		return "", "", false
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || len(id) != 12 || secret == "" {
		return "", "", false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", "", false
	}
	return id, secret, true
}

// List returns every key, revoked ones included, oldest first.
func (s *Store) List(ctx context.Context) ([]Key, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, keyPrefix+">")
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out := []Key{}
	for name := range lister.Keys() {
		k, err := s.Get(ctx, strings.TrimPrefix(name, keyPrefix))
		if errors.Is(err, ErrNoSuchKey) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, *k)
	}
	slices.SortFunc(out, func(a, b Key) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// Revoke marks key id revoked: from then on it authenticates nothing. A
// key already revoked stays as it is.
func (s *Store) Revoke(ctx context.Context, id string) (*Key, error) {
	var k Key
	rev, err := s.read(ctx, keyPrefix+id, &k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrNoSuchKey, id)
	}
	if err != nil {
		return nil, err
	}
	if k.Revoked != nil {
		return &k, nil
	}
	now := s.now().UTC()
	k.Revoked = &now
	data, err := json.Marshal(k)
	if err != nil {
		return nil, err
	}
	// A lost answer leaves the key revoked or not: revoking again is safe.
	if _, err := s.kv.Update(ctx, keyPrefix+id, data, rev); err != nil {
		return nil, fmt.Errorf("revoke key %s: %w", id, err)
	}
	return &k, nil
}
