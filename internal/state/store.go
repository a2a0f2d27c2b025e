package state

import (
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

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/natsconn"
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
	bucket
	worker  string
	now     func() time.Time
	timeout time.Duration
	// writeIDs names each write: a prefix of the Store's own and a count.
	writePrefix string
	writes      atomic.Uint64
}

// DefaultTimeout is how long one read or write of a Store waits for its
// answer unless SetTimeout says otherwise (the JetStream client's own
// default).
const DefaultTimeout = 5 * time.Second

// ambiguousFor bounds how long Update goes on after a write whose answer
// was lost, waiting for the bucket to answer again (a new stream leader
// is elected within seconds) to learn whether the write was stored.
const ambiguousFor = 30 * time.Second

// NewStore returns a Store over kv. worker names the writer in every record
// it writes; now defaults to time.Now.
func NewStore(kv jetstream.KeyValue, worker string, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	var p [6]byte
	_, _ = rand.Read(p[:]) // never fails (crypto/rand)
	return &Store{bucket: bucket{kv: kv}, worker: worker, now: now, timeout: DefaultTimeout, writePrefix: hex.EncodeToString(p[:])}
}

// SetTimeout sets how long one read or write waits for its answer.
func (s *Store) SetTimeout(d time.Duration) { s.timeout = d }

func (s *Store) nextWriteID() string {
	return s.writePrefix + "-" + strconv.FormatUint(s.writes.Add(1), 10)
}

// op is ctx bounded by the Store's timeout, for one read or write.
func (s *Store) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// Get returns the record of jobID and its revision, or ErrNotFound.
func (s *Store) Get(ctx context.Context, jobID string) (*Record, uint64, error) {
	return s.read(ctx, jobID, false)
}

// read is Get, from the bucket's stream leader when leader is set (see
// bucket.get).
func (s *Store) read(ctx context.Context, jobID string, leader bool) (*Record, uint64, error) {
	octx, cancel := s.op(ctx)
	defer cancel()
	value, rev, err := s.get(octx, jobID, leader)
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
//
// A write whose answer is lost (a timeout, a stream leader change) may or
// may not have been stored. update then reads the record again, for up to
// ambiguousFor while the bucket does not answer: a record that carries
// the WriteID of one of its own writes is that write, stored, and is
// returned as written; fn is not applied a second time.
func (s *Store) update(ctx context.Context, jobID string, guess *Record, fn func(*Record) error) (*Record, error) {
	var mine []string // this call's writes whose outcome is unknown
	var unsure time.Time
	spacing := backoff.Exponential{Min: 50 * time.Millisecond, Max: 2 * time.Second}
	for conflicts := 0; conflicts < 16; {
		var cur *Record
		var rev uint64
		var err error
		guessed := guess != nil
		if guessed {
			cur, rev, guess = guess.clone(), guess.revision, nil
		} else {
			// After a conflict, from the leader (see bucket.get).
			cur, rev, err = s.read(ctx, jobID, conflicts > 0)
			switch {
			case errors.Is(err, ErrNotFound):
				cur = &Record{JobID: jobID, CreatedAt: s.now().UTC()}
			case err != nil && len(mine) > 0 && natsconn.Ambiguous(ctx, err) && time.Since(unsure) < ambiguousFor:
				if backoff.Sleep(ctx, spacing.Ceiling(len(mine))) != nil {
					return nil, err
				}
				continue
			case err != nil:
				return nil, err
			case slices.Contains(mine, cur.WriteID):
				return cur, nil // our own write, stored after all
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
		cur.WriteID = s.nextWriteID()
		b, err := json.Marshal(cur)
		if err != nil {
			return nil, fmt.Errorf("encode state %s: %w", jobID, err)
		}
		octx, cancel := s.op(ctx)
		rev, err = s.write(octx, jobID, b, rev)
		cancel()
		switch {
		case err == nil:
			cur.revision = rev
			return cur, nil
		case errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			// Another writer was quicker: read again at once, from the
			// leader (the last read may have come from a replica that had
			// not applied that write yet). A conflict again waits a
			// little, growing and jittered: several writers of one record
			// (a cancel answered by every worker, the job's own delivery)
			// must not keep colliding in step.
			if conflicts++; conflicts > 1 && backoff.Sleep(ctx, conflictSpacing.HalfJitter(conflicts-2)) != nil {
				return nil, fmt.Errorf("write state %s: %w", jobID, ErrConflict)
			}
		case natsconn.Ambiguous(ctx, err) && (len(mine) == 0 || time.Since(unsure) < ambiguousFor):
			if len(mine) == 0 {
				unsure = time.Now()
			}
			mine = append(mine, cur.WriteID)
			if backoff.Sleep(ctx, spacing.Ceiling(len(mine)-1)) != nil {
				return nil, fmt.Errorf("write state %s: %w", jobID, err)
			}
		default:
			return nil, fmt.Errorf("write state %s: %w", jobID, err)
		}
	}
	return nil, fmt.Errorf("write state %s: %w", jobID, ErrConflict)
}

// conflictSpacing spaces the retries of a write after repeated
// conflicts: the 16 a write may meet span 2–4 s.
var conflictSpacing = backoff.Exponential{Min: 5 * time.Millisecond, Max: 400 * time.Millisecond}

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
