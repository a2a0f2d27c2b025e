// Package kvcas writes a key of a NATS key-value bucket by compare-and-set:
// read the value (or take one known with its revision), apply a pure
// change, write it against the revision read, and again on the current
// value when another writer was quicker. The job records (internal/state),
// the quota boards and the rate windows (internal/quota) are written
// through it.
package kvcas

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/natsconn"
)

// Unchanged, returned by a change function, leaves the key as it is:
// Update returns the value the function returned, unwritten, with the
// revision it was read at.
var Unchanged = errors.New("kvcas: unchanged")

// ErrConflict is returned by Update when the key kept changing under it.
var ErrConflict = errors.New("kvcas: the value changed concurrently too often")

// Entry is a value and the revision it was read or written at; revision 0
// means the key has no value.
type Entry[T any] struct {
	Value    T
	Revision uint64
}

// Doc is how the values of one bucket are read, written and recognised.
type Doc[T any] struct {
	// KV is the bucket. Required.
	KV jetstream.KeyValue
	// Conn is KV's connection: when set, the read after a conflict goes to
	// the bucket's stream leader (natsconn.KVRead). Defaults to nil (every
	// read from any replica).
	Conn *nats.Conn
	// Name names the values in errors ("state"). Defaults to the bucket's
	// name.
	Name string
	// WriteID points at the field of a value that carries the id of the
	// write that stored it: a writer whose answer was lost knows its own
	// write by it on the next read. Required.
	WriteID func(*T) *string
	// Decode reads a stored value. Defaults to encoding/json.
	Decode func([]byte) (T, error)
	// Encode writes a value. Defaults to encoding/json.
	Encode func(T) ([]byte, error)
	// Read reads key, from the leader when leader is set. Defaults to
	// natsconn.KVRead over KV and Conn.
	Read func(ctx context.Context, key string, leader bool) ([]byte, uint64, error)
	// Write stores data under key if its revision is still rev (0: if it
	// has no value) and returns the new revision; a conflict matches
	// jetstream.ErrKeyExists. Defaults to KV's Create and Update.
	Write func(ctx context.Context, key string, data []byte, rev uint64) (uint64, error)
	// Timeout bounds each read and each write. Defaults to 5s (the
	// JetStream client's own).
	Timeout time.Duration
	// Conflicts is how many conflicts one Update meets before it returns
	// ErrConflict. Defaults to 16.
	Conflicts int
	// ConflictSpacing spaces the attempts after the second conflict and
	// on (the first is retried at once), half jittered, so that writers of
	// one key do not keep colliding in step. Defaults to 5ms doubling to
	// 400ms: the 16 conflicts span 2–4s.
	ConflictSpacing backoff.Exponential
	// LostSpacing spaces the reads after a write whose answer was lost.
	// Defaults to 50ms doubling to 2s.
	LostSpacing backoff.Exponential
	// LostFor bounds how long Update goes on after a write whose answer
	// was lost, waiting for the bucket to answer again (a new stream
	// leader is elected within seconds) to learn whether it was stored.
	// Defaults to 30s.
	LostFor time.Duration
	// Count, when set, hears each read and write of a key: op "read" or
	// "write", outcome "ok", "absent" (a read of a key without a value),
	// "conflict" (a write against a revision no longer the last), "lost"
	// (no answer: the write may have been stored) or "error".
	Count func(key, op, outcome string)

	ready bool // defaults filled in (New)
}

// New returns d with its defaults filled in, so that each Update need not.
func New[T any](d Doc[T]) *Doc[T] {
	d = d.withDefaults()
	return &d
}

func (d Doc[T]) withDefaults() Doc[T] {
	d.Name = cmp.Or(d.Name, d.KV.Bucket())
	if d.Decode == nil {
		d.Decode = func(b []byte) (T, error) {
			var v T
			err := json.Unmarshal(b, &v)
			return v, err
		}
	}
	if d.Encode == nil {
		d.Encode = func(v T) ([]byte, error) { return json.Marshal(v) }
	}
	if d.Read == nil {
		d.Read = func(ctx context.Context, key string, leader bool) ([]byte, uint64, error) {
			return natsconn.KVRead(ctx, d.KV, d.Conn, key, leader)
		}
	}
	if d.Write == nil {
		d.Write = func(ctx context.Context, key string, data []byte, rev uint64) (uint64, error) {
			if rev == 0 {
				return d.KV.Create(ctx, key, data)
			}
			return d.KV.Update(ctx, key, data, rev)
		}
	}
	d.Timeout = cmp.Or(d.Timeout, 5*time.Second)
	d.Conflicts = cmp.Or(d.Conflicts, 16)
	if d.ConflictSpacing == (backoff.Exponential{}) {
		d.ConflictSpacing = backoff.Exponential{Min: 5 * time.Millisecond, Max: 400 * time.Millisecond}
	}
	if d.Count == nil {
		d.Count = func(string, string, string) {}
	}
	if d.LostSpacing == (backoff.Exponential{}) {
		d.LostSpacing = backoff.Exponential{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	}
	d.LostFor = cmp.Or(d.LostFor, 30*time.Second)
	d.ready = true
	return d
}

// Update writes change applied to key's value and returns what it wrote.
// change is given the current value and whether the key has one (the
// zero T when not: the write then creates the key); it must be a pure
// function of them, as it is applied again after a conflict. An error
// from change ends Update and is returned as is; Unchanged returns
// change's value unwritten.
//
// known, when not nil, is a value Update or a read returned for key: the
// first attempt writes from it without reading (revision 0: creates the
// key). When it is stale the write meets a conflict, and when change
// refuses it (any error, Unchanged too) the current value is read and
// change asked again, so the outcome is always that of an Update from a
// read.
//
// A write whose answer is lost (a timeout, a leader change) may have been
// stored: Update reads again, for up to LostFor while the bucket does not
// answer, and a value that carries the write id of one of its own writes
// is that write, returned as written; change is not applied twice.
func (d *Doc[T]) Update(ctx context.Context, key string, known *Entry[T], change func(cur T, found bool) (T, error)) (Entry[T], error) {
	if !d.ready {
		dd := d.withDefaults()
		d = &dd
	}
	u := &update[T]{doc: d, key: key, known: known, change: change}
	err := backoff.Retry{}.Do(ctx, u.attempt)
	return u.done, err
}

// update is one Update's progress across its attempts.
type update[T any] struct {
	doc    *Doc[T]
	key    string
	known  *Entry[T]
	change func(T, bool) (T, error)
	// mine are the ids of this Update's writes whose answer was lost,
	// since unsure.
	mine      []string
	unsure    time.Time
	conflicts int
	done      Entry[T]
	// outcome is the last failed write's, for Count.
	outcome string
}

// attempt is one read, change and write. Its errors say when to try
// again (backoff.After), or that there is no point (backoff.Permanent).
func (u *update[T]) attempt(ctx context.Context, _ int) error {
	cur, fromKnown, err := u.current(ctx)
	if err != nil {
		return err
	}
	if cur.Revision != 0 && slices.Contains(u.mine, *u.doc.WriteID(&cur.Value)) {
		u.done = cur // a write whose answer was lost, stored after all
		return nil
	}
	next, err := u.change(cur.Value, cur.Revision != 0)
	switch {
	case err != nil && fromKnown:
		return backoff.After(err, 0) // the known value may be stale: ask the stored one
	case errors.Is(err, Unchanged):
		u.done = Entry[T]{Value: next, Revision: cur.Revision}
		return nil
	case err != nil:
		return backoff.Permanent(err)
	}
	id := newWriteID()
	*u.doc.WriteID(&next) = id
	data, err := u.doc.Encode(next)
	if err != nil {
		return backoff.Permanent(fmt.Errorf("encode %s %s: %w", u.doc.Name, u.key, err))
	}
	wctx, cancel := context.WithTimeout(ctx, u.doc.Timeout)
	rev, err := u.doc.Write(wctx, u.key, data, cur.Revision)
	cancel()
	if err == nil {
		u.doc.Count(u.key, "write", "ok")
		u.done = Entry[T]{Value: next, Revision: rev}
		return nil
	}
	err = u.failed(ctx, id, fmt.Errorf("write %s %s: %w", u.doc.Name, u.key, err))
	u.doc.Count(u.key, "write", u.outcome)
	return err
}

// current is the value to change: the known one first, then the stored
// one, from the stream leader once a write met a conflict or lost its
// answer (a replica may be behind that write: it would hide a write of
// ours that was stored, and cost a conflict to find it).
func (u *update[T]) current(ctx context.Context) (cur Entry[T], fromKnown bool, err error) {
	if k := u.known; k != nil {
		u.known = nil
		return *k, true, nil
	}
	rctx, cancel := context.WithTimeout(ctx, u.doc.Timeout)
	data, rev, err := u.doc.Read(rctx, u.key, u.conflicts > 0 || len(u.mine) > 0)
	cancel()
	u.doc.Count(u.key, "read", readOutcome(err))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return Entry[T]{}, false, nil
	case err != nil:
		err = fmt.Errorf("read %s %s: %w", u.doc.Name, u.key, err)
		if len(u.mine) > 0 && natsconn.Ambiguous(ctx, err) && time.Since(u.unsure) < u.doc.LostFor {
			return cur, false, backoff.After(err, u.doc.LostSpacing.Ceiling(len(u.mine)))
		}
		return cur, false, backoff.Permanent(err)
	}
	v, err := u.doc.Decode(data)
	if err != nil {
		return cur, false, backoff.Permanent(fmt.Errorf("decode %s %s: %w", u.doc.Name, u.key, err))
	}
	return Entry[T]{Value: v, Revision: rev}, false, nil
}

// failed says when to try again after the write with id failed with err.
func (u *update[T]) failed(ctx context.Context, id string, err error) error {
	u.outcome = "error"
	switch {
	case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		u.outcome = "conflict"
		if u.conflicts++; u.conflicts > u.doc.Conflicts {
			return backoff.Permanent(fmt.Errorf("write %s %s: %w", u.doc.Name, u.key, ErrConflict))
		}
		if u.conflicts == 1 {
			return backoff.After(err, 0)
		}
		return backoff.After(err, u.doc.ConflictSpacing.HalfJitter(u.conflicts-2))
	case natsconn.Ambiguous(ctx, err) && (len(u.mine) == 0 || time.Since(u.unsure) < u.doc.LostFor):
		u.outcome = "lost"
		if len(u.mine) == 0 {
			u.unsure = time.Now()
		}
		u.mine = append(u.mine, id)
		return backoff.After(err, u.doc.LostSpacing.Ceiling(len(u.mine)-1))
	}
	return backoff.Permanent(err)
}

// readOutcome is a read's outcome for Count.
func readOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "absent"
	}
	return "error"
}

// writeIDs names this process's writes: a random prefix, unique across
// processes and restarts, and a count.
var (
	writePrefix = func() string {
		var p [6]byte
		_, _ = rand.Read(p[:]) // never fails (crypto/rand)
		return hex.EncodeToString(p[:])
	}()
	writes atomic.Uint64
)

func newWriteID() string {
	return writePrefix + "-" + strconv.FormatUint(writes.Add(1), 10)
}
