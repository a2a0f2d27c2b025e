package runner

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/mediaprobe"
	"github.com/sluice-dev/sluice/internal/state"
)

// Preflight modes (SLUICE_PREFLIGHT).
const (
	// PreflightStrict probes every media input of a video job before it is
	// submitted; a broken limit or a format sluice cannot parse fails the
	// job with invalid_media, an input that cannot be fetched with
	// input_unreachable.
	PreflightStrict = "strict"
	// PreflightOff submits without probing: upstream judges the inputs.
	PreflightOff = "off"
)

// probeAttempts bounds the tries of one input whose fetch fails with a
// temporary error; probeBackoff spaces them.
const probeAttempts = 3

var probeBackoff = backoff.Exponential{Min: time.Second, Max: 4 * time.Second}

// probeTimeout bounds one try of one input.
const probeTimeout = 2 * time.Minute

// hasProbes reports whether j has inputs for preflight to probe: a video job
// with inputs, unless preflight is off.
func (r *Runner) hasProbes(j *job) bool {
	return r.cfg.Preflight != PreflightOff && j.kind == "video" && len(j.spec.Video.Inputs()) > 0
}

// preflight checks every media input of a video job against the media
// API's input limits (spec/media-api.md 2.4 and 8) before anything is
// paid for: one place decides whether the job may be submitted. It ends
// the job's start phase (consumer.Delivery.Started) first, probes the
// inputs concurrently, at most PreflightConcurrency at once across the
// worker, and records its pass in the job's record, so a redelivered job
// does not probe again, unless it is about to submit again (its record at
// "submitting": the last worker stopped inside the submit window, maybe
// long ago, and the inputs may have gone since). It returns nil when the
// job may go on.
func (r *Runner) preflight(ctx context.Context, j *job) error {
	if !r.hasProbes(j) {
		return nil
	}
	again := j.rec.Status == state.StatusSubmitting
	if !again && (j.rec.PreflightAt != nil || j.rec.Status != state.StatusReceived) {
		return nil
	}
	inputs := j.spec.Video.Inputs()
	// Fetching may take a while (a slow host, retries): the job leaves the
	// consumer's start phase, so jobs behind it are not held up waiting
	// for it; the probes themselves are bounded by r.probes.
	j.d.Started()
	start := r.cfg.Now()
	results := make([]probeResult, len(inputs))
	var wg sync.WaitGroup
	for i, in := range inputs {
		wg.Go(func() { results[i] = r.probeInput(ctx, in) })
	}
	wg.Wait()

	var fetched int64
	var totals mediaprobe.Totals
	for i, res := range results {
		fetched += res.fetched
		if res.err != nil {
			if errors.Is(res.err, errStopping) || j.stopping() {
				return errStopping
			}
			return res.err
		}
		totals.Add(mediaprobe.Kind(inputs[i].Kind), res.info)
	}
	if le := totals.Check(); le != nil {
		return fail(CodeInvalidMedia, state.StageValidate, true, "video.input.media: %s", le.Message)
	}
	now := r.cfg.Now().UTC()
	passed := set(func(rec *state.Record) { rec.PreflightAt = &now })
	if again {
		// Only while the record is still where this delivery found it:
		// another delivery may have recorded its task meanwhile.
		if err := r.writeRetried(ctx, j, unmoved(state.StatusSubmitting), state.StatusSubmitting, passed); err != nil {
			return transient(err)
		}
	} else if err := r.write(ctx, j, live, state.StatusReceived, passed); err != nil {
		return transient(err)
	}
	j.log.Info().Int("inputs", len(inputs)).Int64("bytes_fetched", fetched).
		Dur("took", r.cfg.Now().Sub(start)).Msg("media inputs passed preflight")
	return nil
}

// probeResult is what probing one input gave.
type probeResult struct {
	info    mediaprobe.Info
	fetched int64
	err     error // a *failure, a *retry, errStopping, or nil
}

// probeInput probes one input, retrying a fetch that failed for a reason
// that may pass: an https input that still fails after probeAttempts is
// unreachable, an s3:// input (sluice's own store) asks for a redelivery.
func (r *Runner) probeInput(ctx context.Context, in jobspec.MediaInput) probeResult {
	var res probeResult
	done, err := r.retry(ctx, backoff.Retry{Spacing: probeBackoff}, func(ctx context.Context, attempt int) (bool, error) {
		var err error
		var fetched int64
		res.info, fetched, err = r.probeOnce(ctx, in)
		res.fetched += fetched
		if err == nil {
			return true, nil
		}
		var f *failure
		switch {
		case errors.As(err, &f):
			return true, f
		case ctx.Err() != nil:
			return true, errStopping
		case !artifacts.IsTemporary(err):
			return true, unreachable(in, err, attempt+1)
		case attempt+1 >= probeAttempts && strings.HasPrefix(in.URL, "s3://"):
			// sluice's own store is away (an outage, a restart): like an
			// artifact copy or a compute input, the job waits for it,
			// redelivered with backoff, rather than failing.
			return true, transient(fmt.Errorf("%s: %w", in.Field, err))
		case attempt+1 >= probeAttempts:
			return true, unreachable(in, err, attempt+1)
		}
		return false, err
	})
	res.err = err
	if !done {
		res.err = errStopping
	}
	return res
}

// probeOnce opens in and probes it. A broken limit or an unparseable file
// is a *failure; any other error is the fetch's.
func (r *Runner) probeOnce(ctx context.Context, in jobspec.MediaInput) (mediaprobe.Info, int64, error) {
	select {
	case r.probes <- struct{}{}:
		defer func() { <-r.probes }()
	case <-ctx.Done():
		return mediaprobe.Info{}, 0, ctx.Err()
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	src, err := r.openInput(ctx, in.URL)
	if err != nil {
		if errors.Is(err, artifacts.ErrTooLarge) {
			return mediaprobe.Info{}, 0, invalidMedia(in, "%s file is larger than sluice fetches: %v", in.Kind, err)
		}
		return mediaprobe.Info{}, 0, err
	}
	info, err := mediaprobe.Inspect(src, src.Size(), mediaprobe.Kind(in.Kind))
	var le *mediaprobe.LimitError
	if errors.As(err, &le) {
		return info, src.fetched(), invalidMedia(in, "%s", le.Message)
	}
	if err != nil {
		return info, src.fetched(), err
	}
	return info, src.fetched(), nil
}

// mediaSource is an opened input: its bytes by range and their count.
type mediaSource interface {
	io.ReaderAt
	Size() int64
	fetched() int64
}

type rangeSource struct{ *artifacts.RangeReader }

func (s rangeSource) fetched() int64 { return s.BytesFetched() }

type memorySource struct{ *bytes.Reader }

func (memorySource) fetched() int64 { return 0 }

// openInput opens a media address for ranged reads: an https URL through
// the Fetcher (its destination rules, redirect limits, timeouts and size
// cap), an s3:// object through the Store, a data URI from the spec itself.
func (r *Runner) openInput(ctx context.Context, u string) (mediaSource, error) {
	switch {
	case strings.HasPrefix(u, "data:"):
		_, payload, _ := strings.Cut(u, ",")
		b, err := base64.StdEncoding.DecodeString(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: data URI payload is not base64", artifacts.ErrInvalidArgument)
		}
		return memorySource{bytes.NewReader(b)}, nil
	case strings.HasPrefix(u, "s3://"):
		bucket, key, err := jobspec.ParseS3URL(u)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", artifacts.ErrInvalidArgument, err)
		}
		rr, err := r.cfg.Store.OpenRange(ctx, bucket, key)
		if err != nil {
			return nil, err
		}
		return rangeSource{rr}, nil
	}
	rr, err := r.cfg.Fetcher.OpenRange(ctx, u)
	if err != nil {
		return nil, err
	}
	return rangeSource{rr}, nil
}

func invalidMedia(in jobspec.MediaInput, format string, args ...any) *failure {
	return fail(CodeInvalidMedia, state.StageValidate, true, "%s: %s", in.Field, fmt.Sprintf(format, args...))
}

// unreachable is the failure of an input that could not be fetched.
func unreachable(in jobspec.MediaInput, err error, tries int) *failure {
	return fail(CodeInputUnreachable, state.StageValidate, true, "%s: cannot fetch the %s after %d %s: %v",
		in.Field, in.Kind, tries, map[bool]string{true: "try", false: "tries"}[tries == 1], err)
}
