package quota

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/kvcas"
	"github.com/sluice-dev/sluice/internal/natsconn"
)

// window is the value of a resource's rate key: the requests the fleet
// has claimed in window Win (Unix time divided by the window's length).
type window struct {
	Win  int64 `json:"win"`
	Used int   `json:"used"`
	// Rate is the rate of the worker that wrote last, for display.
	Rate float64 `json:"rate"`
	// Writer is the id of the write that stored the window (see
	// board.Writer).
	Writer string `json:"writer,omitempty"`
}

// Rate shares a request rate between the fleet's workers: time is cut in
// windows (one second, or 1/rate when the rate is below one per second),
// each allowing rate×window requests; a worker claims them from the
// window's key in small batches by compare-and-set and spends them
// locally, and what it has not spent when the window ends is lost, never
// carried over. So no window sees more requests sent than it allows. The
// windows are cut on the bucket's server's clock (natsconn.Clock), which every
// worker reads within a round trip, not on the workers' own.
type Rate struct {
	resource string
	key      string
	rate     float64
	length   time.Duration
	per      int
	batch    int
	doc      *kvcas.Doc[window]
	log      zerolog.Logger
	clock    *natsconn.Clock
	// claimer is held by the one goroutine claiming from the key.
	claimer chan struct{}
	// tokens left of window win, spent locally.
	mu     sync.Mutex
	win    int64
	tokens int
}

func newRate(resource string, rate float64, cfg Config) *Rate {
	length := time.Second
	if rate < 1 {
		length = time.Duration(float64(time.Second) / rate)
	}
	per := max(1, int(math.Floor(rate*length.Seconds()+1e-9)))
	r := &Rate{
		resource: resource, key: "rate." + resource, rate: rate, length: length, per: per,
		// Small batches: each claim is one write, and tokens a worker
		// holds at a window's end are lost to the fleet.
		batch: max(1, per/10),
		doc: kvcas.New(kvcas.Doc[window]{
			KV: cfg.KV, Conn: cfg.Conn, Name: "quota",
			WriteID: func(w *window) *string { return &w.Writer },
			// A window nobody can read is started afresh.
			Decode: func(b []byte) (window, error) {
				var w window
				if json.Unmarshal(b, &w) != nil {
					return window{}, nil
				}
				return w, nil
			},
			Count: cfg.Count,
		}),
		clock:   cfg.Clock,
		log:     cfg.Logger.With().Str("quota", resource+" rate").Logger(),
		claimer: make(chan struct{}, 1),
	}
	return r
}

// Wait waits until one request may be sent, or ctx ends.
func (r *Rate) Wait(ctx context.Context) error {
	for {
		if r.spend() {
			return nil
		}
		select {
		case r.claimer <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.spend() { // another goroutine claimed meanwhile
			<-r.claimer
			return nil
		}
		err := r.claim(ctx)
		<-r.claimer
		if err != nil {
			return err
		}
	}
}

func (r *Rate) winOf(t time.Time) int64 { return t.UnixNano() / int64(r.length) }

// spend takes one local token of the current window.
func (r *Rate) spend() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tokens > 0 && r.win == r.winOf(r.clock.Now()) {
		r.tokens--
		return true
	}
	return false
}

// claim claims a batch of the current window's requests from the key,
// waiting for the next window while this one is spent. A write whose
// answer is lost counts as not applied unless the key shows it (kvcas):
// the fleet then sends fewer requests, never more.
func (r *Rate) claim(ctx context.Context) error {
	retry := backoff.Retry{Spacing: backoff.Exponential{Min: 20 * time.Millisecond, Max: time.Second}}
	for {
		var win int64
		err := retry.Do(ctx, func(ctx context.Context, _ int) error {
			if err := r.clock.Sync(ctx); err != nil {
				return err
			}
			win = r.winOf(r.clock.Now())
			n, err := r.claimOnce(ctx, win)
			switch {
			case err == nil:
				r.mu.Lock()
				r.win, r.tokens = win, n
				r.mu.Unlock()
				return nil
			case errors.Is(err, errSpent):
				return backoff.Permanent(err)
			case ctx.Err() == nil:
				r.log.Debug().Err(err).Msg("rate window not claimed; trying again")
			}
			return err
		})
		if !errors.Is(err, errSpent) {
			return err
		}
		// This window is spent (or a faster clock started the next): wait
		// for the next one.
		untilNext := time.Duration((win+1)*int64(r.length) - r.clock.Now().UnixNano())
		if err := backoff.Sleep(ctx, max(untilNext, time.Millisecond)); err != nil {
			return err
		}
	}
}

// announce writes the rate on the key, leaving the window and its count as
// they are, so that the fleet's rate shows (enqueue quota) before the
// first request claims a window. It is best effort: a claim writes the
// rate too.
func (r *Rate) announce(ctx context.Context) {
	_, err := r.doc.Update(ctx, r.key, nil, func(cur window, _ bool) (window, error) {
		cur.Rate = r.rate
		return cur, nil
	})
	if err != nil && ctx.Err() == nil {
		r.log.Debug().Err(err).Msg("rate not announced; the first request will")
	}
}

// errSpent: the window claimed from has no request left.
var errSpent = errors.New("quota: rate window spent")

// claimOnce claims up to a batch of window win and returns how many, or
// errSpent.
func (r *Rate) claimOnce(ctx context.Context, win int64) (n int, err error) {
	_, err = r.doc.Update(ctx, r.key, nil, func(cur window, _ bool) (window, error) {
		switch {
		case cur.Win > win:
			// Another worker's clock is ahead: wait for ours to catch up.
			return cur, errSpent
		case cur.Win < win:
			cur = window{Win: win}
		}
		if cur.Used >= r.per {
			return cur, errSpent
		}
		n = min(r.batch, r.per-cur.Used)
		return window{Win: win, Used: cur.Used + n, Rate: r.rate}, nil
	})
	return n, err
}

// rateTransport waits for the fleet's rate before each request.
type rateTransport struct {
	base http.RoundTripper
	rate *Rate
}

func (t *rateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.rate.Wait(req.Context()); err != nil {
		return nil, err
	}
	return t.base.RoundTrip(req)
}
