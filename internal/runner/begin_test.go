package runner

import (
	"slices"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	f := newDecideFixture()
	for _, tt := range slices.Concat(f.arrivalCases(), f.clockCases(), f.limitCases()) {
		t.Run(tt.name, func(t *testing.T) {
			before := *tt.rec
			if got := decide(tt.rec, tt.a, tt.spec, f.quiet[tt.rec]); got != tt.want {
				t.Fatalf("decide = %d, want %d", got, tt.want)
			}
			if tt.rec.Attempts != before.Attempts || tt.rec.Status != before.Status || tt.rec.Cancel != before.Cancel {
				t.Fatalf("decide changed the record: %+v, was %+v", tt.rec, before)
			}
		})
	}
}

// decideCase is one row of TestDecide.
type decideCase struct {
	name string
	rec  *state.Record
	a    arrival
	spec *jobspec.Spec
	want verdict
}

// decideFixture builds TestDecide's records and arrivals.
type decideFixture struct {
	now           time.Time
	ackWait       time.Duration
	video, stream *jobspec.Spec
	// quiet is how long this worker has seen each record unchanged.
	quiet                map[*state.Record]time.Duration
	first, orphan, stray arrival
}

func newDecideFixture() *decideFixture {
	f := &decideFixture{
		now: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), ackWait: 30 * time.Second,
		video:  &jobspec.Spec{Video: &jobspec.Video{}},
		stream: &jobspec.Spec{Speech: &jobspec.Speech{Mode: jobspec.ModeStream}},
		quiet:  map[*state.Record]time.Duration{},
	}
	f.first = arrival{ackWait: f.ackWait, delivered: 1, maxDeliver: 3}
	f.orphan = f.with(func(a *arrival) { a.orphaned = true })
	f.stray = f.with(func(a *arrival) { a.stray = true })
	return f
}

// at is a record this worker has seen unchanged for seen. Its UpdatedAt,
// its writer's clock, plays no part: the rows' writers' clocks are ten
// minutes behind, right or ten minutes ahead in turn.
func (f *decideFixture) at(status state.Status, seen time.Duration) *state.Record {
	skew := time.Duration(len(f.quiet)%3-1) * 10 * time.Minute
	rec := &state.Record{JobID: "j", Status: status, Attempts: 1, UpdatedAt: f.now.Add(skew)}
	f.quiet[rec] = seen
	return rec
}

// with is the first arrival changed by fn.
func (f *decideFixture) with(fn func(*arrival)) arrival { a := f.first; fn(&a); return a }

func written(rec *state.Record, at time.Time) *state.Record { rec.UpdatedAt = at; return rec }

func cancelled(rec *state.Record, requested time.Time) *state.Record {
	rec.Cancel = &state.CancelRequest{RequestedAt: requested}
	return rec
}

// arrivalCases decide by how the message arrived and where the record is.
func (f *decideFixture) arrivalCases() []decideCase {
	at, with, first, orphan, stray, video, ackWait := f.at, f.with, f.first, f.orphan, f.stray, f.video, f.ackWait
	return []decideCase{
		{"a new job runs", &state.Record{JobID: "j"}, first, video, verdictRun},
		{"a redelivery resumes", at(state.StatusSubmitted, time.Hour), with(func(a *arrival) { a.delivered = 2 }), video, verdictRun},
		{"a finished job republishes", at(state.StatusSucceeded, 0), first, video, verdictFinished},
		{"a finished job republishes even from a stray", at(state.StatusFailed, 0), stray, video, verdictFinished},
		{"an orphan leaves a job written within an AckWait", at(state.StatusRunning, ackWait/2), orphan, video, verdictBusy},
		{"an orphan takes over a job left alone for an AckWait", at(state.StatusRunning, ackWait), orphan, video, verdictRun},
		{"an orphan of a job never seen runs it", &state.Record{JobID: "j"}, orphan, video, verdictRun},
		{"busy wins over a held copy", at(state.StatusRunning, 0), with(func(a *arrival) { a.orphaned, a.stray = true, true }), video, verdictBusy},
		{"a stray copy of a held job is dead-lettered alone", at(state.StatusReceived, time.Hour), stray, video, verdictHeldCopy},
		{"a stray of no held job fails", &state.Record{JobID: "j"}, stray, video, verdictStray},
		{"a held copy wins over a paying delivery", at(state.StatusSubmitting, 0), stray, video, verdictHeldCopy},
		{"a paid submit is left alone for two AckWaits", at(state.StatusSubmitting, 2*ackWait-time.Second), first, video, verdictInSubmit},
		{"a submit left for two leases is taken over", at(state.StatusSubmitting, 2*ackWait), first, video, verdictRun},
	}
}

// clockCases decide by how long a record has been seen unchanged, whatever
// its writer's clock says, and by the kind's paying steps.
func (f *decideFixture) clockCases() []decideCase {
	at, first, orphan, video, stream, ackWait, now := f.at, f.first, f.orphan, f.video, f.stream, f.ackWait, f.now
	return []decideCase{
		{"a submit just written by a worker ten minutes behind is left alone",
			written(at(state.StatusSubmitting, 0), now.Add(-10*time.Minute)), first, video, verdictInSubmit},
		{"a submit written by a worker 90s behind and seen for a lease is left alone",
			written(at(state.StatusSubmitting, ackWait), now.Add(-90*time.Second-ackWait)), first, video, verdictInSubmit},
		{"a submit written by a worker ten minutes ahead is taken over once seen for two leases",
			written(at(state.StatusSubmitting, 2*ackWait), now.Add(10*time.Minute)), first, video, verdictRun},
		{"an orphan leaves a job just written by a worker ten minutes behind",
			written(at(state.StatusRunning, 0), now.Add(-10*time.Minute)), orphan, video, verdictBusy},
		{"a stream being read is left alone", at(state.StatusCollecting, 0), first, stream, verdictInSubmit},
		{"a stored stream is not paying", func() *state.Record {
			rec := at(state.StatusCollecting, 0)
			rec.Artifacts = []state.Artifact{{Key: "k"}}
			return rec
		}(), first, stream, verdictRun},
		{"collecting video is not paying", at(state.StatusCollecting, 0), first, video, verdictRun},
	}
}

// limitCases decide by the spec, the delivery limit and a cancel.
func (f *decideFixture) limitCases() []decideCase {
	at, with, first, orphan, video, now := f.at, f.with, f.first, f.orphan, f.video, f.now
	return []decideCase{
		{"a spec that does not decode fails", &state.Record{JobID: "j"}, with(func(a *arrival) { a.badSpec = true }), nil, verdictBadSpec},
		{"a stray wins over a bad spec", &state.Record{JobID: "j"}, with(func(a *arrival) { a.stray, a.badSpec = true, true }), nil, verdictStray},
		{"a refused job fails", &state.Record{JobID: "j"}, with(func(a *arrival) { a.refused = "tenant acme is bound" }), video, verdictRefused},
		{"a bad spec wins over a refusal", &state.Record{JobID: "j"}, with(func(a *arrival) { a.badSpec, a.refused = true, "bound" }), nil, verdictBadSpec},
		{"a refused job upstream goes on", func() *state.Record {
			rec := at(state.StatusSubmitted, time.Hour)
			rec.Upstream.TaskID = "task-1"
			return rec
		}(), with(func(a *arrival) { a.refused = "tenant acme is bound" }), video, verdictRun},
		{"a refused job inside its submit goes on", func() *state.Record {
			rec := at(state.StatusReceived, time.Hour)
			rec.Submits = 1
			return rec
		}(), with(func(a *arrival) { a.refused = "tenant acme is bound" }), video, verdictRun},
		{"delivered at the limit runs", at(state.StatusReceived, time.Hour), with(func(a *arrival) { a.delivered = 3 }), video, verdictRun},
		{"delivered past the limit fails", at(state.StatusReceived, time.Hour), with(func(a *arrival) { a.delivered = 4 }), video, verdictTooMany},
		{"quota waits do not count against the limit", func() *state.Record {
			rec := at(state.StatusReceived, time.Hour)
			rec.QuotaWaits = 1
			return rec
		}(), with(func(a *arrival) { a.delivered = 4 }), video, verdictRun},
		{"an orphan counts the record's attempts, this one included", func() *state.Record {
			rec := at(state.StatusReceived, time.Hour)
			rec.Attempts = 3
			return rec
		}(), orphan, video, verdictTooMany},
		{"a cancel before the submit ends the job", cancelled(at(state.StatusReceived, time.Hour), now), first, video, verdictCancelled},
		{"a cancel at the submit ends the job", cancelled(at(state.StatusSubmitting, time.Hour), now), first, video, verdictCancelled},
		{"a cancel after the submit is the run's to carry out", cancelled(at(state.StatusRunning, time.Hour), now), first, video, verdictRun},
		{"a cancel that came first applies", cancelled(&state.Record{JobID: "j"}, now), with(func(a *arrival) { a.published = now }), video, verdictCancelled},
		{"a cancel long before the job was published is not its", cancelled(&state.Record{JobID: "j"}, now.Add(-time.Hour)),
			with(func(a *arrival) { a.published = now }), video, verdictRun}}
}

func TestCountDelivery(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	labels := map[string]string{"team": "a"}
	rec := &state.Record{JobID: "j", Cancel: &state.CancelRequest{RequestedAt: now.Add(-time.Hour)}}
	countDelivery(rec, arrival{published: now}, &jobspec.Spec{Labels: labels})
	if rec.Attempts != 1 || rec.Status != state.StatusReceived || rec.Cancel != nil || rec.Labels["team"] != "a" {
		t.Fatalf("a first delivery: %+v", rec)
	}
	rec = &state.Record{JobID: "j", Status: state.StatusRunning, Attempts: 2, Labels: labels}
	countDelivery(rec, arrival{}, &jobspec.Spec{})
	if rec.Attempts != 3 || rec.Status != state.StatusRunning || rec.Labels["team"] != "a" {
		t.Fatalf("a redelivery: %+v", rec)
	}
}

// TestSightings: a record is as old as this worker has seen it unchanged,
// whatever its writer's clock says; a new write starts it again.
func TestSightings(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	rec := func(write string, updated time.Time) *state.Record {
		return &state.Record{JobID: "j", Status: state.StatusSubmitting, WriteID: write, UpdatedAt: updated}
	}
	steps := []struct {
		name string
		id   string
		rec  *state.Record
		at   time.Time
		want time.Duration
	}{
		{"first seen: new, though its writer's clock says an hour ago", "j", rec("w1", now.Add(-time.Hour)), now, 0},
		{"seen again unchanged", "j", rec("w1", now.Add(-time.Hour)), now.Add(30 * time.Second), 30 * time.Second},
		{"another job is its own", "k", rec("w1", now.Add(-time.Hour)), now.Add(40 * time.Second), 0},
		{"written again, by a writer ten minutes ahead: new", "j", rec("w2", now.Add(10*time.Minute)), now.Add(time.Minute), 0},
		{"that write seen a lease later", "j", rec("w2", now.Add(10*time.Minute)), now.Add(2 * time.Minute), time.Minute},
		{"a record without write id, by its writer's time", "j", rec("", now), now.Add(3 * time.Minute), 0},
		{"the same record without write id", "j", rec("", now), now.Add(4 * time.Minute), time.Minute},
		{"a sighting past forgetAfter is dropped when another is noted", "k", rec("w9", now), now.Add(forgetAfter + 4*time.Minute), 0},
		{"so the first job starts again", "j", rec("", now), now.Add(forgetAfter + 6*time.Minute), 0},
	}
	s := newSightings()
	for _, st := range steps {
		if got := s.unchanged(st.id, st.rec, st.at); got != st.want {
			t.Fatalf("%s: unchanged %s, want %s", st.name, got, st.want)
		}
	}
	s.forget("j")
	if got := s.unchanged("j", rec("", now), now.Add(forgetAfter+7*time.Minute)); got != 0 {
		t.Fatalf("after forget: unchanged %s, want 0", got)
	}
}
