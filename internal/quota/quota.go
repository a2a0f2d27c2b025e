// Package quota shares an upstream account's limits between every worker
// of a fleet, through NATS alone: a key-value bucket (SLUICE_QUOTA) holds,
// per resource, the leases of the tasks in flight upstream (job id, holder,
// expiry) and the workers waiting for one, changed only by
// compare-and-set; and, per resource, a window of the requests sent in the
// current second, claimed in small batches the same way.
//
// A lease lives TTL (the consumers' AckWait) and its worker renews it past
// half of that. A job whose task is already upstream takes its lease over
// on its next delivery whatever the limit, so the count follows the
// upstream tasks, not the workers: a lease handed back by a stopping
// worker, or by a job retried later while its task runs, counts until a
// TTL past the job's next delivery, and one expired with a dead worker
// counts two TTLs more, as "handed back", which lets the consumers pull
// the job to take it over but starts no new task in its place; one nobody
// takes over then lapses. A handed-back lease is kept for its job: it lets
// a consumer pull one job of its kind once its delivery is due, and a job
// of another kind, or one already waiting for a free place, does not take
// it. Two deliveries of one job share its lease. While
// another worker waits, no worker takes more than its fair share (the
// limit split between the workers holding or waiting). The runner asks
// for a lease before each paid submit and gives it back once the task is
// terminal; the consumer asks how many jobs it may pull (Reserve) before
// pulling, and asks again when the board changes (Changed). A worker that
// dies is found out within seconds by the others (alive.go), which hand
// its leases back and its jobs over at once instead of waiting for them
// to expire.
package quota

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/sluice-dev/sluice/internal/natsconn"
)

// Bucket is the key-value bucket of the fleet's quotas.
const Bucket = "SLUICE_QUOTA"

// The resources: the media API's tasks and the compute platform's jobs.
const (
	Media   = "media"
	Compute = "compute"
	// Containers are the container service's instances, held from create
	// to delete.
	Containers = "container"
)

// Resources lists the resources in display order.
var Resources = []string{Media, Compute, Containers}

// ResourceOf is the resource a job of kind uses ("" for none).
func ResourceOf(kind string) string {
	switch kind {
	case "video", "speech":
		return Media
	case "compute":
		return Compute
	case "container":
		return Containers
	}
	return ""
}

// BucketConfig is the definition of the SLUICE_QUOTA bucket: one value
// per key, in memory-speed file storage, with the streams' replicas.
func BucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "sluice fleet quotas: upstream task leases and request windows per resource",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    cmp.Or(replicas, 1),
	}
}

// Limits are the fleet's limits; 0 is no limit.
type Limits struct {
	// MediaTasks is SLUICE_FLEET_MEDIA_TASKS.
	MediaTasks int
	// MediaRate is SLUICE_FLEET_MEDIA_RATE, requests per second.
	MediaRate float64
	// ComputeJobs is SLUICE_FLEET_COMPUTE_JOBS.
	ComputeJobs int
	// ComputeRate is SLUICE_FLEET_COMPUTE_RATE, requests per second.
	ComputeRate float64
	// Containers is SLUICE_FLEET_CONTAINERS: container instances alive.
	Containers int
}

// Any reports whether any limit is set.
func (l Limits) Any() bool {
	return l.MediaTasks > 0 || l.MediaRate > 0 || l.ComputeJobs > 0 || l.ComputeRate > 0 || l.Containers > 0
}

// Config configures a Fleet.
type Config struct {
	// KV is the SLUICE_QUOTA bucket. Required when a limit is set.
	KV jetstream.KeyValue
	// Conn is the connection KV uses. When set, a read of the board after
	// a write lost to a conflict goes to the bucket's stream leader
	// (natsconn.KVRead): a replica behind the last writes must not keep
	// this worker's writes failing.
	Conn *nats.Conn
	// Holder names this worker on the board. Required when a limit is set.
	Holder string
	// Limits are the fleet's limits.
	Limits Limits
	// TTL is a lease's life. Defaults to 60s (the default AckWait).
	TTL time.Duration
	// Observe receives each resource's status after every read of its
	// board. Optional.
	Observe func(Status)
	// Logger defaults to a disabled logger.
	Logger *zerolog.Logger
	// Now is the worker's own clock, of which the quotas use only elapsed
	// times (see natsconn.Clock). Defaults to time.Now.
	Now func() time.Time
	// Clock is the clock every time on the boards is on. Defaults to the
	// clock of KV's server (NewClock over KV and Now).
	Clock *natsconn.Clock
	// AIMD paces the effective limit that concurrency conflicts lower;
	// zero fields take their defaults.
	AIMD AIMD
	// Count, when set, hears each operation on the bucket and each alive
	// request (see watch): key is the board's key ("leases.media",
	// "rate.media") or "alive"; op "read", "write" (compare-and-set) or
	// "ping"; outcome "ok", "absent", "conflict", "lost" or "error" (see
	// kvcas.Doc.Count), or for a ping "ok", "silent" (no responders) or
	// "error".
	Count func(key, op, outcome string)
}

// Fleet is one worker's side of the fleet's quotas. A nil *Fleet, or one
// without limits, lets everything through.
type Fleet struct {
	tasks map[string]*leases
	rates map[string]*Rate
	// watch learns of other holders' deaths (nil without Conn).
	watch *watch
}

// New returns a Fleet; call Run to keep its leases.
func New(cfg Config) (*Fleet, error) {
	cfg.TTL = cmp.Or(cfg.TTL, 60*time.Second)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		l := zerolog.Nop()
		cfg.Logger = &l
	}
	if cfg.Count == nil {
		cfg.Count = func(string, string, string) {}
	}
	f := &Fleet{tasks: map[string]*leases{}, rates: map[string]*Rate{}}
	if !cfg.Limits.Any() {
		return f, nil
	}
	if cfg.KV == nil || cfg.Holder == "" {
		return nil, errors.New("quota: KV and Holder are required with a fleet limit")
	}
	if cfg.Clock == nil {
		cfg.Clock = natsconn.NewClock(cfg.KV, cfg.Now, *cfg.Logger)
	}
	for res, n := range map[string]int{Media: cfg.Limits.MediaTasks, Compute: cfg.Limits.ComputeJobs, Containers: cfg.Limits.Containers} {
		if n < 0 {
			return nil, fmt.Errorf("quota: %s limit %d is negative", res, n)
		}
		if n > 0 {
			f.tasks[res] = newLeases(res, n, cfg)
		}
	}
	if cfg.Conn != nil && len(f.tasks) > 0 {
		f.watch = newWatch(cfg, slices.Collect(maps.Values(f.tasks)))
		for _, l := range f.tasks {
			l.handedOver = f.watch.handedOver
		}
	}
	for res, r := range map[string]float64{Media: cfg.Limits.MediaRate, Compute: cfg.Limits.ComputeRate} {
		if r < 0 {
			return nil, fmt.Errorf("quota: %s rate %g is negative", res, r)
		}
		if r > 0 {
			f.rates[res] = newRate(res, r, cfg)
		}
	}
	return f, nil
}

// Run keeps this worker's leases on the board until ctx ends, then writes
// its last releases and hand-backs.
func (f *Fleet) Run(ctx context.Context) {
	if f == nil {
		return
	}
	var announced sync.WaitGroup
	for _, r := range f.rates {
		announced.Go(func() { r.announce(ctx) })
	}
	defer announced.Wait()
	done := make(chan struct{})
	for _, l := range f.tasks {
		go func() { l.run(ctx); done <- struct{}{} }()
	}
	if f.watch != nil {
		go func() { f.watch.run(ctx); done <- struct{}{} }()
		defer func() { <-done }()
	}
	for range f.tasks {
		<-done
	}
}

func (f *Fleet) leases(kind string) *leases {
	if f == nil {
		return nil
	}
	return f.tasks[ResourceOf(kind)]
}

// Lease is one job's hold on its resource; a nil *Lease is no hold (no
// limit is set).
type Lease struct {
	l   *leases
	job string
}

// Acquire waits until job, of kind, may start a task upstream, and returns
// its lease. While it waits the job is not failed: the caller holds its
// message (the consumer's heartbeats keep it). It returns ctx's error when
// ctx ends first. reply is the ack subject of the job's delivery, which
// another worker Naks should this one die holding the lease.
func (f *Fleet) Acquire(ctx context.Context, kind, job, reply string) (*Lease, error) {
	l := f.leases(kind)
	if l == nil {
		return nil, nil
	}
	if err := l.acquire(ctx, kind, job, reply); err != nil {
		return nil, err
	}
	return &Lease{l: l, job: job}, nil
}

// Waiting reports whether job would wait in Acquire now (a hint for the
// caller, which may end its start phase first).
func (f *Fleet) Waiting(kind string) bool {
	l := f.leases(kind)
	if l == nil {
		return false
	}
	st := l.status()
	return st.InUse >= st.Effective || st.WaitingHere > 0
}

// Take returns job's lease, taken over whatever the limit: job's task is
// already upstream (a redelivered job resuming its task). reply is as for
// Acquire.
func (f *Fleet) Take(kind, job, reply string) *Lease {
	l := f.leases(kind)
	if l == nil {
		return nil
	}
	l.takeOver(kind, job, reply)
	return &Lease{l: l, job: job}
}

// Release gives the lease back: the job's task is terminal, or was never
// created.
func (s *Lease) Release() {
	if s != nil {
		s.l.release(s.job, false, 0)
	}
}

// HandBack leaves the lease counting for the job's next delivery, due in
// redeliverIn (0 for at once; a retry's delay), which takes it over
// (Take): the task is still upstream and the job is handed to another
// worker, or to this one later. Unless taken over it lapses a lease life
// past that delivery, and a grace after.
func (s *Lease) HandBack(redeliverIn time.Duration) {
	if s != nil {
		s.l.release(s.job, true, redeliverIn)
	}
}

// Conflict tells the fleet that upstream refused job's submit, of kind,
// for too many tasks at once: the fleet's effective limit of kind's
// resource drops (see aimd), unless the job's lease was granted before
// the last cut. Call it before the job's lease is given back. Nothing
// without a limit.
func (f *Fleet) Conflict(kind, job string) {
	if l := f.leases(kind); l != nil {
		l.conflict(job)
	}
}

// Reserve returns how many of n jobs of kind the consumer may pull now
// (n when no limit applies), and counts them as starting until each asks
// for its lease (Acquire, Take) or Unreserve drops it.
func (f *Fleet) Reserve(kind string, n int) int {
	l := f.leases(kind)
	if l == nil {
		return n
	}
	return l.reserve(kind, n)
}

// Changed returns a channel closed when this worker next sees kind's
// board change (a place freed, a lease granted or taken over): a consumer
// the quota holds back asks Reserve again then rather than after a fixed
// wait. nil (never closed) without a limit.
func (f *Fleet) Changed(kind string) <-chan struct{} {
	l := f.leases(kind)
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Unreserve drops the n reservations of kind that the consumer's last
// pull did not use (n may be 0): fewer jobs came than it was allowed, so
// the stream has run dry for now.
func (f *Fleet) Unreserve(kind string, n int) {
	if l := f.leases(kind); l != nil {
		l.unreserve(kind, max(n, 0), true)
	}
}

// DropReservation drops the reservation of one pulled job of kind that
// ended before asking for a lease (Acquire and Take drop it themselves).
func (f *Fleet) DropReservation(kind string) {
	if l := f.leases(kind); l != nil {
		l.unreserve(kind, 1, false)
	}
}

// Transport returns base limited by resource's fleet rate: every request
// waits for a share of the fleet's requests of the current second. Without
// a rate limit it returns base.
func (f *Fleet) Transport(resource string, base http.RoundTripper) http.RoundTripper {
	if f == nil || f.rates[resource] == nil {
		return base
	}
	return &rateTransport{base: base, rate: f.rates[resource]}
}

// Status is one resource's quota as a worker sees it.
type Status struct {
	Resource string `json:"resource"`
	// Limit is the configured limit (0: none).
	Limit int `json:"limit"`
	// Effective is the limit leases are granted by: Limit, or less while
	// upstream answers concurrency conflicts (see AIMD).
	Effective int `json:"effective_limit"`
	// InUse is the leases held across the fleet.
	InUse int `json:"in_use"`
	// Held is this worker's leases (for a reader of the board, 0).
	Held int `json:"held,omitempty"`
	// Waiting is the jobs held by workers waiting for a lease.
	Waiting int `json:"waiting"`
	// Queued is the jobs of the resource's kinds not yet pulled by any
	// worker (a worker pulls only what the quota lets it start); filled
	// by readers of the stream (jobclient), not by the board.
	Queued uint64 `json:"queued"`
	// WaitingHere is this worker's jobs waiting for a lease.
	WaitingHere int `json:"waiting_here,omitempty"`
	// Rate is the configured rate (0: none) and RateUsed the requests of
	// the last full second in the fleet's window (reads of the board).
	Rate     float64 `json:"rate,omitempty"`
	RateUsed int     `json:"rate_used,omitempty"`
}

func (l *leases) status() Status {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.statusLocked(l.clock.Now())
}

// Statuses returns the worker's view of each limited resource.
func (f *Fleet) Statuses() []Status {
	if f == nil {
		return nil
	}
	var out []Status
	for _, res := range Resources {
		st := Status{Resource: res}
		l, r := f.tasks[res], f.rates[res]
		if l == nil && r == nil {
			continue
		}
		if l != nil {
			st = l.status()
		}
		if r != nil {
			st.Rate = r.rate
		}
		out = append(out, st)
	}
	return out
}
