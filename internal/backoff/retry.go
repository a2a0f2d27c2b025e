package backoff

import (
	"context"
	"errors"
	"time"
)

// Retry spaces the attempts of one operation: Do calls op until it
// returns nil, an error marked Permanent, or the budget runs out, waiting
// Spacing's delays in between. The zero value retries until ctx ends, 200ms
// doubling to 10s with full jitter.
type Retry struct {
	// Spacing gives the delays between attempts. Defaults to the zero
	// Exponential.
	Spacing Exponential
	// Jitter picks how a delay is drawn from Spacing. Defaults to
	// JitterFull.
	Jitter Jitter
	// Attempts bounds the calls of op; 0 is unbounded (until ctx ends).
	// Defaults to 0.
	Attempts int
	// Sleep waits between attempts. Defaults to Sleep (tests pass one
	// that does not sleep).
	Sleep func(context.Context, time.Duration) error
}

// Jitter is how Retry draws a delay from its Spacing.
type Jitter int

const (
	// JitterFull draws from [Min, Ceiling] (Exponential.Delay).
	JitterFull Jitter = iota
	// JitterHalf draws from [Ceiling/2, Ceiling] (Exponential.HalfJitter).
	JitterHalf
	// JitterNone waits exactly Ceiling (Exponential.Ceiling).
	JitterNone
)

// delay returns the wait before retry number attempt (0-based).
func (r Retry) delay(attempt int) time.Duration {
	switch r.Jitter {
	case JitterHalf:
		return r.Spacing.HalfJitter(attempt)
	case JitterNone:
		return r.Spacing.Ceiling(attempt)
	}
	return r.Spacing.Delay(attempt)
}

// Do calls op (with its attempt number, 0-based) until it succeeds. It
// returns nil on success; the error unwrapped from Permanent at once;
// op's last error when Attempts calls failed; or, when ctx ends while
// waiting, op's last error joined with ctx's (errors.Is finds both). An
// error marked After waits its own delay instead of Spacing's.
func (r Retry) Do(ctx context.Context, op func(ctx context.Context, attempt int) error) error {
	sleep := r.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	for attempt := 0; ; attempt++ {
		err := op(ctx, attempt)
		if err == nil {
			return nil
		}
		if p, ok := errors.AsType[*permanent](err); ok {
			return p.err
		}
		wait := r.delay(attempt)
		if a, ok := errors.AsType[*after](err); ok {
			err, wait = a.err, a.wait
		}
		if r.Attempts > 0 && attempt+1 >= r.Attempts {
			return err
		}
		if cerr := sleep(ctx, wait); cerr != nil {
			return errors.Join(err, cerr)
		}
	}
}

// After marks err as worth another attempt after wait exactly (0: at
// once, unless ctx has ended), in place of Spacing's delay: for an
// operation whose failures differ in how soon a retry may succeed, such
// as a compare-and-set that lost to another writer (at once) or whose
// answer was lost in a leader election (seconds). A nil err stays nil.
func After(err error, wait time.Duration) error {
	if err == nil {
		return nil
	}
	return &after{err: err, wait: wait}
}

type after struct {
	err  error
	wait time.Duration
}

func (a *after) Error() string { return a.err.Error() }
func (a *after) Unwrap() error { return a.err }

// Permanent marks err as not worth another attempt: Retry.Do returns err
// at once. A nil err stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err: err}
}

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }
