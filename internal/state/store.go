package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/kvcas"
)

// ErrNotFound is returned by Get for a job without a record.
var ErrNotFound = errors.New("state: no record for job")

// Unchanged may be returned by an Update func to leave the record as it
// is: Update then returns the current record without writing.
var Unchanged = kvcas.Unchanged

// ErrConflict is returned by Update when the record kept changing under it.
var ErrConflict = kvcas.ErrConflict

// Store reads and writes records in the SLUICE_STATE bucket.
type Store struct {
	bucket
	worker string
	now    func() time.Time
	doc    *kvcas.Doc[Record]
}

// DefaultTimeout is how long one read or write of a Store waits for its
// answer unless SetTimeout says otherwise (the JetStream client's own
// default).
const DefaultTimeout = 5 * time.Second

// NewStore returns a Store over kv. worker names the writer in every record
// it writes; now defaults to time.Now.
func NewStore(kv jetstream.KeyValue, worker string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	s := &Store{bucket: bucket{kv: kv}, worker: worker, now: now}
	s.SetTimeout(DefaultTimeout)
	return s
}

// SetTimeout sets how long one read or write waits for its answer.
func (s *Store) SetTimeout(d time.Duration) {
	s.doc = kvcas.New(kvcas.Doc[Record]{
		KV: s.kv, Name: "state", Timeout: d,
		WriteID: func(r *Record) *string { return &r.WriteID },
		// Through the bucket, so that Direct's connection carries both.
		Read: s.get, Write: s.write,
	})
}

// Get returns the record of jobID and its revision, or ErrNotFound.
func (s *Store) Get(ctx context.Context, jobID string) (*Record, uint64, error) {
	octx, cancel := context.WithTimeout(ctx, s.doc.Timeout)
	defer cancel()
	value, rev, err := s.get(octx, jobID, false)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("get state %s: %w", jobID, err)
	}
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return nil, 0, fmt.Errorf("decode state %s: %w", jobID, err)
	}
	r.revision = rev
	return &r, rev, nil
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
	return s.update(ctx, last.JobID, &kvcas.Entry[Record]{Value: *last, Revision: last.revision}, fn)
}

// UpdateNew is Update for a record that most likely does not exist yet,
// such as a job's at its first delivery: fn is applied to a fresh record,
// which is created in one round trip; only when the record exists already
// is it read and fn applied to it, as Update does.
func (s *Store) UpdateNew(ctx context.Context, jobID string, fn func(*Record) error) (*Record, error) {
	return s.update(ctx, jobID, &kvcas.Entry[Record]{Value: *s.fresh(jobID)}, fn)
}

// update writes fn applied to a copy of the record (known, else read)
// by compare-and-set (kvcas): a write whose answer was lost is known by
// its WriteID, and fn is not applied to it a second time.
func (s *Store) update(ctx context.Context, jobID string, known *kvcas.Entry[Record], fn func(*Record) error) (*Record, error) {
	e, err := s.doc.Update(ctx, jobID, known, func(cur Record, found bool) (Record, error) {
		r := cur.clone()
		if !found && r.JobID == "" { // neither stored nor known
			r = s.fresh(jobID)
		}
		if err := fn(r); err != nil {
			return *r, err
		}
		r.JobID, r.UpdatedAt = jobID, s.now().UTC()
		if s.worker != "" {
			r.Worker = s.worker
		}
		return *r, nil
	})
	if err != nil {
		return nil, err
	}
	e.Value.revision = e.Revision
	return &e.Value, nil
}

// fresh is the record of a job no worker has written yet.
func (s *Store) fresh(jobID string) *Record {
	return &Record{JobID: jobID, CreatedAt: s.now().UTC()}
}

// ErrNotCancellable is the refusal older workers answered for a compute
// job already submitted. RequestCancel no longer returns it (the worker
// holding the job deletes it upstream); it stays so a reply from such a
// worker is still understood.
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
// a job no worker has seen is renewed: see PendingCancelTTL). A submitted
// compute job is flagged like any other: its worker deletes it upstream.
func (s *Store) RequestCancel(ctx context.Context, jobID string) (*Record, error) {
	var seen *Record
	rec, err := s.Update(ctx, jobID, func(r *Record) error {
		seen = r
		switch {
		case r.Status.Terminal(), r.Cancel != nil && r.Status != "":
			return Unchanged
		}
		r.Cancel = &CancelRequest{RequestedAt: s.now().UTC()}
		return nil
	})
	if errors.Is(err, ErrNotCancellable) {
		return seen, err
	}
	return rec, err
}
