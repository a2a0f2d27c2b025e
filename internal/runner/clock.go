package runner

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/internal/backoff"
)

// retry calls op, spaced by rt on the runner's sleeper (Config.Sleep),
// until op reports it is done (a nil error counts as done). done is false
// when the attempts ran out or ctx ended during a wait; err is then op's
// last error as it returned it, which the caller acts on.
func (r *Runner) retry(ctx context.Context, rt backoff.Retry, op func(ctx context.Context, attempt int) (done bool, err error)) (done bool, err error) {
	rt.Sleep = r.cfg.Sleep
	var last error
	err = rt.Do(ctx, func(ctx context.Context, attempt int) error {
		ok, err := op(ctx, attempt)
		if ok || err == nil {
			done = true
			return backoff.Permanent(err)
		}
		last = err
		return err
	})
	if !done {
		return false, last
	}
	return true, err
}

// pause waits d on the runner's sleeper, or less when ctx ends, the
// worker stops or wake (when not nil) is closed; it reports whether wake
// was closed. The caller checks for a stop itself.
func (r *Runner) pause(ctx context.Context, j *job, wake <-chan struct{}, d time.Duration) (woken bool) {
	if d > 0 {
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-j.d.Stopping():
			case <-wake:
			case <-wctx.Done():
			}
			cancel()
		}()
		_ = r.cfg.Sleep(wctx, d)
		cancel()
	}
	select {
	case <-wake:
		return wake != nil
	default:
		return false
	}
}
