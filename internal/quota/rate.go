package quota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/backoff"
	"github.com/sluice-dev/sluice/internal/natsconn"
)

// window is the value of a resource's rate key: the requests the fleet
// has claimed in window Win (Unix time divided by the window's length).
type window struct {
	Win  int64 `json:"win"`
	Used int   `json:"used"`
	// Rate is the rate of the worker that wrote last, for display.
	Rate   float64 `json:"rate"`
	Writer string  `json:"writer,omitempty"`
}

// Rate shares a request rate between the fleet's workers: time is cut in
// windows (one second, or 1/rate when the rate is below one per second),
// each allowing rate×window requests; a worker claims them from the
// window's key in small batches by compare-and-set and spends them
// locally, and what it has not spent when the window ends is lost, never
// carried over. So no window of the fleet's clock sees more requests
// sent than it allows. Workers' clocks should agree (NTP) to well under a
// window.
type Rate struct {
	resource string
	key      string
	rate     float64
	length   time.Duration
	per      int
	batch    int
	holder   string
	kv       jetstream.KeyValue
	nc       *nats.Conn
	log      zerolog.Logger
	now      func() time.Time
	// claimer is held by the one goroutine claiming from the key.
	claimer chan struct{}
	// tokens left of window win, spent locally.
	mu     sync.Mutex
	win    int64
	tokens int
	seq    int
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
		batch:  max(1, per/10),
		holder: cfg.Holder, kv: cfg.KV, nc: cfg.Conn, now: cfg.Now,
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
	if r.tokens > 0 && r.win == r.winOf(r.now()) {
		r.tokens--
		return true
	}
	return false
}

// claim claims a batch of the current window's requests from the key,
// waiting for the next window while this one is spent. A write whose
// answer is lost counts as not applied unless the key shows it: the fleet
// then sends fewer requests, never more.
func (r *Rate) claim(ctx context.Context) error {
	retry := backoff.Exponential{Min: 20 * time.Millisecond, Max: time.Second}
	conflict := false
	for attempt := 0; ; attempt++ {
		now := r.now()
		win := r.winOf(now)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, wait, err := r.claimOnce(cctx, win, conflict)
		cancel()
		conflict = errors.Is(err, jetstream.ErrKeyExists)
		switch {
		case err == nil && n > 0:
			r.mu.Lock()
			r.win, r.tokens = win, n
			r.mu.Unlock()
			return nil
		case err == nil:
			// This window is spent (or a faster clock started the next):
			// wait for the next one.
			if err := backoff.Sleep(ctx, wait); err != nil {
				return err
			}
			attempt = -1
		case errors.Is(err, jetstream.ErrKeyExists):
			// Another worker claimed first: read again at once, from the
			// bucket's leader.
		default:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.log.Debug().Err(err).Msg("rate window not claimed; trying again")
			if err := backoff.Sleep(ctx, retry.Delay(attempt)); err != nil {
				return err
			}
		}
	}
}

// claimOnce claims up to a batch of window win; n 0 means none is left,
// and wait how long until the next window starts. After a conflict
// (leader) the key is read from the bucket's stream leader.
func (r *Rate) claimOnce(ctx context.Context, win int64, leader bool) (n int, wait time.Duration, err error) {
	var cur window
	value, rev, err := natsconn.KVRead(ctx, r.kv, r.nc, r.key, leader)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return 0, 0, err
	default:
		if json.Unmarshal(value, &cur) != nil {
			cur = window{}
		}
	}
	untilNext := time.Duration((win+1)*int64(r.length) - r.now().UnixNano())
	switch {
	case cur.Win > win:
		// Another worker's clock is ahead: wait for ours to catch up.
		return 0, max(untilNext, time.Millisecond), nil
	case cur.Win < win:
		cur = window{Win: win}
	}
	if cur.Used >= r.per {
		return 0, max(untilNext, time.Millisecond), nil
	}
	n = min(r.batch, r.per-cur.Used)
	r.seq++
	next := window{Win: win, Used: cur.Used + n, Rate: r.rate, Writer: fmt.Sprintf("%s#%d", r.holder, r.seq)}
	data, _ := json.Marshal(next)
	if rev == 0 {
		_, err = r.kv.Create(ctx, r.key, data)
	} else {
		_, err = r.kv.Update(ctx, r.key, data, rev)
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		// The answer may be lost with the write applied: recognise it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if e, gerr := r.kv.Get(rctx, r.key); gerr == nil {
			var got window
			if json.Unmarshal(e.Value(), &got) == nil && got.Writer == next.Writer {
				return n, 0, nil
			}
		}
	}
	if err != nil {
		return 0, 0, err
	}
	return n, 0, nil
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
