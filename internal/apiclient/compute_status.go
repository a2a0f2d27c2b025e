package apiclient

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// A worker polling each running compute job on its own pays one detail
// call per job per poll round: 10,000 jobs at a 30 s interval are 333
// requests a second against a 20 a second client limit. ListedJob reads
// the region's realtime job list instead (platform-evidence.md sections 1
// and 7), once per round for every job of the region, and the caller
// falls back to the detail call for any job the list does not show.

// ErrNotListed is returned by ListedJob for a job the region's list did
// not show. It says nothing about the job's end: the list may have moved
// it to another page while it was read, or the platform may not list it
// yet. Ask the job detail.
var ErrNotListed = errors.New("apiclient: compute job not in the region's job list")

// statusListPages bounds one walk of the realtime list: 1,000 pages of
// listPageSize are 100,000 jobs, more than one user runs in a region.
const statusListPages = 1000

// noListFor is how long a region whose realtime list answered HTTP 404 or
// 405 (no such route) is read job by job, without asking the list again.
const noListFor = 10 * time.Minute

// walkWait bounds how long a job waits for another job's walk of the
// list: a page that hangs must not hold every job of the region for the
// walk's attempts; past it the job asks its own detail.
const walkWait = 30 * time.Second

// statusBoard is the last read of a region's realtime job list, shared by
// every job of the session.
type statusBoard struct {
	mu      sync.Mutex
	snap    *statusSnap
	reading chan struct{} // closed when the read in flight ends; nil when none
	// noListUntil is when the region's list is asked again after it
	// answered no route.
	noListUntil time.Time
}

// statusSnap is one walk of the list: the jobs it showed, by id. err is
// why the walk stopped early; jobs then holds the pages read before.
type statusSnap struct {
	at   time.Time
	jobs map[string]*JobDetail
	err  error
}

// ListedJob returns job jobID as the region's realtime job list
// (GET {hpc}/hpc/openapi/v2/jobs?strClusterIDList=<scheduler id>&start=&limit=)
// showed it in a walk begun less than maxAge ago. The walk is shared: the
// first caller after maxAge reads every page, the callers meanwhile wait
// for it, so one walk per maxAge serves every job of the region.
//
// Errors: ErrNotListed when the walk did not show the job (or stopped
// early, a page lost, before showing it); ErrNotSupported while the
// region's list answers no route (remembered for noListFor, logged once);
// the walk's error (an error envelope such as 10001, a network error)
// when it read no page. None of them says the job ended: ask Job.
func (s *ClusterSession) ListedJob(ctx context.Context, jobID string, maxAge time.Duration) (*JobDetail, error) {
	snap, err := s.statusSnapshot(ctx, maxAge)
	if err != nil {
		return nil, err
	}
	if d, ok := snap.jobs[jobID]; ok {
		copied := *d
		return &copied, nil
	}
	if snap.err != nil && len(snap.jobs) == 0 {
		return nil, snap.err
	}
	return nil, fmt.Errorf("apiclient: compute job %s: %w", jobID, ErrNotListed)
}

// statusSnapshot returns a walk begun less than maxAge ago, reading one
// when there is none and no other caller is reading.
func (s *ClusterSession) statusSnapshot(ctx context.Context, maxAge time.Duration) (*statusSnap, error) {
	b := &s.board
	for {
		b.mu.Lock()
		now := s.c.cfg.Now()
		switch {
		case now.Before(b.noListUntil):
			b.mu.Unlock()
			return nil, fmt.Errorf("apiclient: compute job list of region %s: %w (it answered no route; asked again after %s)",
				s.clusterName, ErrNotSupported, b.noListUntil.UTC().Format(time.RFC3339))
		case b.snap != nil && now.Sub(b.snap.at) < maxAge && !now.Before(b.snap.at):
			snap := b.snap
			b.mu.Unlock()
			return snap, nil
		case b.reading != nil:
			wait := b.reading
			b.mu.Unlock()
			timer := time.NewTimer(walkWait)
			select {
			case <-wait:
				timer.Stop()
				continue
			case <-timer.C:
				return nil, fmt.Errorf("apiclient: compute job list of region %s: %w: a walk of it has run for %s", s.clusterName, ErrNotListed, walkWait)
			case <-ctx.Done():
				timer.Stop()
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		b.reading = done
		b.mu.Unlock()
		snap := s.readStatusList(ctx, now)
		s.keepSnapshot(ctx, snap)
		close(done)
		if errors.Is(snap.err, ErrNotSupported) {
			return nil, snap.err
		}
		return snap, nil
	}
}

// keepSnapshot stores snap as the board's last walk, or, when the list
// has no route, remembers that (logged once per noListFor). A walk cut by
// its reader's own stop (ctx) is not kept: the other jobs read again.
func (s *ClusterSession) keepSnapshot(ctx context.Context, snap *statusSnap) {
	b := &s.board
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reading = nil
	switch {
	case ctx.Err() != nil:
		return
	case !errors.Is(snap.err, ErrNotSupported):
		b.snap = snap
		return
	}
	b.snap = nil
	b.noListUntil = snap.at.Add(noListFor)
	s.c.cfg.Logger.Warn().Err(snap.err).Str("region", s.clusterName).Str("cluster_id", s.clusterID).
		Dur("for", noListFor).Msg("the region's realtime job list answered no route; reading compute jobs one by one")
}

// readStatusList walks the region's realtime list. Each item is read as
// a job detail; public clients name the status jobStatus, jobState or
// status and the id jobId or id, so each is accepted. A page that fails
// ends the walk: the pages before it stay usable.
func (s *ClusterSession) readStatusList(ctx context.Context, now time.Time) *statusSnap {
	snap := &statusSnap{at: now, jobs: make(map[string]*JobDetail)}
	schedID, err := s.SchedulerID(ctx)
	if err != nil {
		snap.err = err
		return snap
	}
	err = s.walkList(ctx, "job status list", "/hpc/openapi/v2/jobs", url.Values{"strClusterIDList": {schedID}}, statusListPages, func(item json.RawMessage) error {
		d, err := listedDetail(item)
		if err == nil && d.JobID != "" {
			snap.jobs[d.JobID] = d
		}
		return err
	})
	if err != nil {
		snap.err = historyError("", err)
	}
	return snap
}

// listedDetail reads one item of the realtime list as a job detail.
func listedDetail(item json.RawMessage) (*JobDetail, error) {
	var d JobDetail
	if err := json.Unmarshal(item, &d); err != nil {
		return nil, err
	}
	var alt struct {
		ID       string `json:"id"`
		JobState string `json:"jobState"`
		Status   string `json:"status"`
	}
	if err := decodeLenient(item, &alt); err != nil {
		return nil, err
	}
	d.JobID = strings.TrimSpace(cmp.Or(d.JobID, alt.ID))
	d.JobStatus = cmp.Or(d.JobStatus, alt.JobState, alt.Status)
	return &d, nil
}
