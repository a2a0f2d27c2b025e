package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/natsconn"
)

// ErrNoSpec is returned by Specs.Get for a job whose spec is not kept: it
// never reached a worker, or its SLUICE_STATE_TTL has passed.
var ErrNoSpec = errors.New("state: no spec kept for job")

// Specs keeps each job's spec, byte for byte as received, in the
// SLUICE_SPECS bucket under the job id, so that a retry needs only the id.
type Specs struct {
	bucket
	timeout time.Duration
}

// NewSpecs returns Specs over kv.
func NewSpecs(kv jetstream.KeyValue) *Specs {
	return &Specs{bucket: bucket{kv: kv}, timeout: DefaultTimeout}
}

// SetTimeout sets how long one read or write of Keep waits for its
// answer (DefaultTimeout unless set), as Store.SetTimeout does.
func (s *Specs) SetTimeout(d time.Duration) { s.timeout = d }

// Keep stores data as jobID's spec unless one is kept already: the first
// spec received under an id is the one a retry runs again.
//
// Each write waits at most the timeout (SetTimeout), whatever ctx. A write whose
// answer is lost may have been stored: Keep reads the key again, from the
// bucket's stream leader, and is done when it holds a spec (its own or an
// earlier one: either is the first), else writes again, for up to
// KeepLostFor while the bucket does not answer (a leader election).
func (s *Specs) Keep(ctx context.Context, jobID string, data []byte) error {
	var lost time.Time
	err := keepRetry.Do(ctx, func(ctx context.Context, _ int) error {
		if !lost.IsZero() {
			rctx, cancel := context.WithTimeout(ctx, s.timeout)
			_, _, err := s.get(rctx, jobID, true)
			cancel()
			switch {
			case err == nil:
				return nil // stored after all, or kept before
			case !errors.Is(err, jetstream.ErrKeyNotFound):
				return s.lostAgain(ctx, lost, err)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.write(wctx, jobID, data, 0)
		cancel()
		switch {
		case err == nil || errors.Is(err, jetstream.ErrKeyExists):
			return nil
		case lost.IsZero() && natsconn.Ambiguous(ctx, err):
			lost = time.Now()
		}
		return s.lostAgain(ctx, lost, err)
	})
	if err != nil {
		return fmt.Errorf("keep spec %s: %w", jobID, err)
	}
	return nil
}

// KeepLostFor bounds how long Keep goes on after a write whose answer was
// lost, waiting for the bucket to answer again to learn whether it was
// stored: a new stream leader is elected within seconds.
const KeepLostFor = 30 * time.Second

// keepRetry spaces Keep's attempts after a lost answer.
var keepRetry = backoff.Retry{Spacing: backoff.Exponential{Min: 50 * time.Millisecond, Max: 2 * time.Second}, Jitter: backoff.JitterNone}

// lostAgain says whether Keep tries again after err: only while its first
// lost answer (lost) is less than KeepLostFor old and err may pass.
func (s *Specs) lostAgain(ctx context.Context, lost time.Time, err error) error {
	if lost.IsZero() || !natsconn.Ambiguous(ctx, err) || time.Since(lost) >= KeepLostFor {
		return backoff.Permanent(err)
	}
	return err
}

// Get returns jobID's spec as received, or ErrNoSpec.
func (s *Specs) Get(ctx context.Context, jobID string) ([]byte, error) {
	e, err := s.kv.Get(ctx, jobID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w %s", ErrNoSpec, jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("get spec %s: %w", jobID, err)
	}
	return e.Value(), nil
}
