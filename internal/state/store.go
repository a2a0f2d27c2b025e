package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNotFound is returned by Get for a job without a record.
var ErrNotFound = errors.New("state: no record for job")

// Unchanged may be returned by an Update func to leave the record as it
// is: Update then returns the current record without writing.
var Unchanged = errors.New("state: unchanged")

// ErrConflict is returned by Update when the record kept changing under it.
var ErrConflict = errors.New("state: record changed concurrently too often")

// Store reads and writes records in the SLUICE_STATE bucket.
type Store struct {
	kv     jetstream.KeyValue
	worker string
	now    func() time.Time
}

// NewStore returns a Store over kv. worker names the writer in every record
// it writes; now defaults to time.Now.
func NewStore(kv jetstream.KeyValue, worker string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{kv: kv, worker: worker, now: now}
}

// Get returns the record of jobID and its revision, or ErrNotFound.
func (s *Store) Get(ctx context.Context, jobID string) (*Record, uint64, error) {
	e, err := s.kv.Get(ctx, jobID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get state %s: %w", jobID, err)
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return nil, 0, fmt.Errorf("decode state %s: %w", jobID, err)
	}
	r.revision = e.Revision()
	return &r, e.Revision(), nil
}

// Update applies fn to the current record of jobID (a fresh one when there
// is none) and writes it back with compare-and-set, retrying fn on a
// concurrent write. fn must be a pure function of the record it is given.
// A non-nil error from fn aborts the update and is returned as is.
func (s *Store) Update(ctx context.Context, jobID string, fn func(*Record) error) (*Record, error) {
	return s.update(ctx, jobID, nil, fn)
}

// UpdateFrom is Update starting from last, a record that Get, Update,
// UpdateFrom or UpdateNew returned for the same job: fn is applied to a
// copy of last, which is written with compare-and-set against the revision
// last was read or written at. While nobody else wrote the record that
// saves Update's read, one round trip; when someone did, the write fails
// and fn is applied again to the current record, as Update does. When fn
// returns Unchanged or an error for last, the current record is read and
// fn asked again, so the outcome is always Update's. last is not modified.
func (s *Store) UpdateFrom(ctx context.Context, last *Record, fn func(*Record) error) (*Record, error) {
	if last == nil {
		return nil, errors.New("state: UpdateFrom: no record")
	}
	return s.update(ctx, last.JobID, last, fn)
}

// UpdateNew is Update for a record that most likely does not exist yet,
// such as a job's at its first delivery: fn is applied to a fresh record,
// which is created in one round trip; only when the record exists already
// is it read and fn applied to it, as Update does.
func (s *Store) UpdateNew(ctx context.Context, jobID string, fn func(*Record) error) (*Record, error) {
	return s.update(ctx, jobID, &Record{JobID: jobID, CreatedAt: s.now().UTC()}, fn)
}

// update is Update, trying first to write fn applied to a copy of guess
// (when not nil) with compare-and-set against guess's revision (0: the
// record must not exist).
func (s *Store) update(ctx context.Context, jobID string, guess *Record, fn func(*Record) error) (*Record, error) {
	for range 16 {
		var cur *Record
		var rev uint64
		var err error
		guessed := guess != nil
		if guessed {
			cur, rev, guess = guess.clone(), guess.revision, nil
		} else {
			cur, rev, err = s.Get(ctx, jobID)
			if errors.Is(err, ErrNotFound) {
				cur = &Record{JobID: jobID, CreatedAt: s.now().UTC()}
			} else if err != nil {
				return nil, err
			}
		}
		if err := fn(cur); err != nil {
			switch {
			case guessed:
				// The guess may be stale: let the current record decide.
				continue
			case errors.Is(err, Unchanged):
				return cur, nil
			}
			return nil, err
		}
		cur.JobID = jobID
		cur.UpdatedAt = s.now().UTC()
		if s.worker != "" {
			cur.Worker = s.worker
		}
		b, err := json.Marshal(cur)
		if err != nil {
			return nil, fmt.Errorf("encode state %s: %w", jobID, err)
		}
		if rev == 0 {
			rev, err = s.kv.Create(ctx, jobID, b)
		} else {
			rev, err = s.kv.Update(ctx, jobID, b, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("write state %s: %w", jobID, err)
		}
		cur.revision = rev
		return cur, nil
	}
	return nil, fmt.Errorf("write state %s: %w", jobID, ErrConflict)
}

// ErrNotCancellable refuses a cancel: a compute job already submitted
// cannot be cancelled, because the compute platform has no cancel
// operation.
var ErrNotCancellable = errors.New("a compute job cannot be cancelled once submitted: the platform has no cancel operation")

// Active reports whether s is a step at which the job is upstream and not
// yet finished.
func (s Status) Active() bool {
	return s == StatusSubmitted || s == StatusRunning || s == StatusCollecting
}

// PendingCancelTTL is how long a cancel of a job that no worker has seen
// yet stops it: a job published more than this after the cancel runs (the
// cancel was of a job that did not exist, a mistyped id say).
const PendingCancelTTL = 10 * time.Minute

// PendingCancelApplies reports whether rec's cancel stops a delivery of
// its job published at published. Once a worker has seen the job (its
// record has a status) the cancel always applies; before, only to a job
// published before the cancel or at most PendingCancelTTL after it.
func PendingCancelApplies(rec *Record, published time.Time) bool {
	if rec.Cancel == nil {
		return false
	}
	return rec.Status != "" || published.IsZero() || !published.After(rec.Cancel.RequestedAt.Add(PendingCancelTTL))
}

// RequestCancel sets the cancel flag of jobID, creating the record when no
// worker has seen the job yet, and returns the record as it then is. A job
// already finished, or already flagged, is returned unchanged (the flag of
// a job no worker has seen is renewed: see PendingCancelTTL). A compute
// job already submitted is refused with ErrNotCancellable and the record
// it has (a flag would be ignored while the job runs on).
func (s *Store) RequestCancel(ctx context.Context, jobID string) (*Record, error) {
	var seen *Record
	rec, err := s.Update(ctx, jobID, func(r *Record) error {
		seen = r
		switch {
		case r.Status.Terminal(), r.Cancel != nil && r.Status != "":
			return Unchanged
		case r.Kind == "compute" && r.Status.Active():
			return ErrNotCancellable
		}
		r.Cancel = &CancelRequest{RequestedAt: s.now().UTC()}
		return nil
	})
	if errors.Is(err, ErrNotCancellable) {
		return seen, err
	}
	return rec, err
}
