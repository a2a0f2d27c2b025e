package artifacts

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// Copy streams the source that open opens into the object key, retrying
// transient failures: each attempt opens the source afresh and runs Put;
// an error for which IsTemporary is true is retried after a backoff
// (doubling from MinBackoff to MaxBackoff, or the source's Retry-After when
// longer) up to MaxAttempts attempts in all. ErrTooLarge, ErrPrivateAddress,
// a 4xx answer and every other permanent error end it at once. The
// Content-Type is the source's when specific, else derived from key (see
// ContentType). Copy calls nothing but open and S3: a failed copy never
// repeats the work that produced the source.
func (s *Store) Copy(ctx context.Context, key string, maxBytes int64, open OpenFunc) (Artifact, error) {
	if err := s.checkPut(key, maxBytes); err != nil {
		return Artifact{}, err
	}
	if open == nil {
		return Artifact{}, invalidf("open", "required")
	}
	for attempt := 1; ; attempt++ {
		a, err := s.copyOnce(ctx, key, maxBytes, open)
		if err == nil {
			return a, nil
		}
		if ctx.Err() == nil && !IsTemporary(err) {
			// Never going to be retried: an attempt count would read as
			// if more were coming.
			return Artifact{}, fmt.Errorf("artifacts: copy %s: permanent error, not retried: %w", key, err)
		}
		if ctx.Err() != nil || attempt >= s.cfg.MaxAttempts {
			return Artifact{}, fmt.Errorf("artifacts: copy %s: attempt %d of %d: %w", key, attempt, s.cfg.MaxAttempts, err)
		}
		if serr := s.cfg.Sleep(ctx, s.delay(attempt, err)); serr != nil {
			return Artifact{}, fmt.Errorf("artifacts: copy %s: attempt %d of %d: %w (waiting to retry: %w)", key, attempt, s.cfg.MaxAttempts, err, serr)
		}
	}
}

// copyOnce is one attempt of Copy.
func (s *Store) copyOnce(ctx context.Context, key string, maxBytes int64, open OpenFunc) (Artifact, error) {
	body, contentType, source, err := open(ctx)
	if err != nil {
		return Artifact{}, fmt.Errorf("open source: %w", err)
	}
	if body == nil {
		return Artifact{}, invalidf("open", "returned no body and no error")
	}
	defer body.Close()
	return s.Put(ctx, key, ContentType(contentType, key), source, body, maxBytes)
}

// delay is the wait after failed attempt number attempt (1-based): the
// exponential backoff, or the source's Retry-After when that is longer,
// capped at MaxBackoff.
func (s *Store) delay(attempt int, err error) time.Duration {
	d := backoff.Exponential{Min: s.cfg.MinBackoff, Max: s.cfg.MaxBackoff}.Ceiling(attempt - 1)
	if fe, ok := errors.AsType[*FetchError](err); ok && fe.RetryAfter > d {
		d = fe.RetryAfter
	}
	return min(d, s.cfg.MaxBackoff)
}
