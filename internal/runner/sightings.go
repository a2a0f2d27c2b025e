package runner

import (
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/state"
)

// sightings measures how long a job's record has stayed as it is, on this
// worker's clock alone. A record's UpdatedAt is its writer's clock, which
// may be minutes off this worker's: compared with this worker's clock, a
// record just written by a worker whose clock is behind would look long
// abandoned, and a delivery inside its paid submit would be paid again.
// Instead, the first time this worker reads a version of a record (the
// write that stored it, WriteID) it notes the time, and the record is as
// old as that version has been seen unchanged since: never older than it
// really is, whatever the clocks, as the version was written before it
// was first seen. Elapsed times are the monotonic clock's (time.Now's, or
// Config.Now's reading of it), so a wall clock that is stepped does not
// move them either.
type sightings struct {
	mu   sync.Mutex
	seen map[string]sighting
}

// sighting is the version of a job's record this worker saw, and since
// when.
type sighting struct {
	version version
	since   time.Time
}

// version names one write of a record: its write id, and its writer's
// time for records written before write ids existed.
type version struct {
	write   string
	updated int64
}

// forgetAfter is how long a sighting is kept: a record left alone that
// long has been taken over long since, or its job ended.
const forgetAfter = time.Hour

func newSightings() *sightings { return &sightings{seen: map[string]sighting{}} }

// unchanged returns how long this worker has seen rec, the record of job
// id, as it is now, at now: zero the first time.
func (s *sightings) unchanged(id string, rec *state.Record, now time.Time) time.Duration {
	v := version{write: rec.WriteID, updated: rec.UpdatedAt.UnixNano()}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got, ok := s.seen[id]; ok && got.version == v {
		return max(now.Sub(got.since), 0)
	}
	for other, got := range s.seen {
		if now.Sub(got.since) > forgetAfter {
			delete(s.seen, other)
		}
	}
	s.seen[id] = sighting{version: v, since: now}
	return 0
}

// forget drops job id's sighting: this worker goes on with the job, or
// the job ended.
func (s *sightings) forget(id string) {
	s.mu.Lock()
	delete(s.seen, id)
	s.mu.Unlock()
}
