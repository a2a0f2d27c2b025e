package explore

import (
	"fmt"
	"sort"
	"strings"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/events"
)

// Violation is one invariant a schedule broke.
type Violation struct {
	Invariant string
	Job       string
	Detail    string
}

func (v Violation) String() string { return fmt.Sprintf("%s: %s: %s", v.Invariant, v.Job, v.Detail) }

// The invariants (docs/guarantees.md, "The decision-point explorer").
const (
	invAliveAfterEnd  = "nothing alive after the job's terminal event"
	invForeignID      = "no job reports an upstream id another job created"
	invOnePaidSubmit  = "at most one paid submit per job"
	invQuota          = "the fleet quota never exceeded"
	invOneTerminal    = "exactly one terminal event per job"
	invNoneLost       = "every job ends"
	invStepOnce       = "a pipeline's step runs once, and only when published"
	invStepAgrees     = "a pipeline's event agrees with its steps"
	explainedAliveErr = "instance_not_deleted"
)

// check checks a finished schedule against the simulators' records and the
// events published.
func (r *run) check(evs []events.Event, submits map[string]int) []Violation {
	recs := append(r.media.Records(), r.compute.Records()...)
	var out []Violation
	out = append(out, r.checkTerminals(evs)...)
	out = append(out, r.checkUpstream(evs, recs, submits)...)
	out = append(out, r.checkQuota(evs)...)
	out = append(out, r.checkPipelines(evs, submits)...)
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// checkQuota: the media tasks running at once stay within the fleet's
// quota, plus one for each second paid submit of a job (the submit window
// of guarantees.md: the first task cannot be found and runs on unobserved,
// holding no lease; a second submit the record does not count is a
// violation of its own).
func (r *run) checkQuota(evs []events.Event) []Violation {
	members := map[string]int{}
	for _, j := range r.ran(evs) {
		members[j.family]++
	}
	paid := map[string]int{}
	for _, rec := range r.media.Records() {
		paid[familyOf(rec)]++
	}
	allowed := fleetTasks
	for f, n := range paid {
		allowed += max(0, n-members[f])
	}
	peak := r.media.Counters().PeakRunning()
	if peak > allowed {
		return []Violation{{invQuota, "-", fmt.Sprintf("%d media tasks ran at once, the fleet's quota is %d (%d with the submit window's second submits)", peak, fleetTasks, allowed)}}
	}
	if peak > fleetTasks {
		r.t.Logf("seed %d: %d media tasks ran at once over a quota of %d, explained: second submits of the submit window", r.seed, peak, fleetTasks)
	}
	return nil
}

// checkTerminals: one terminal event per job, none missing.
func (r *run) checkTerminals(evs []events.Event) []Violation {
	count := map[string]int{}
	for _, e := range evs {
		if terminal(e.Data.Status) {
			count[e.Data.JobID]++
		}
	}
	var out []Violation
	for _, j := range r.jobs {
		if j.step {
			continue // checkPipelines
		}
		switch n := count[j.id]; {
		case n == 0:
			out = append(out, Violation{invNoneLost, j.id, fmt.Sprintf("no terminal event once nothing moved for %s", quietBound)})
		case n > 1:
			out = append(out, Violation{invOneTerminal, j.id, fmt.Sprintf("%d terminal events", n)})
		}
	}
	return out
}

// checkUpstream: what each job's family paid for, what is still alive
// after its end, and whose upstream ids the events report. submits is
// each job's record's count of submissions: a second one the record
// counts is the documented submit window (guarantees.md, "The submit
// window"), explained; one it does not count is a violation.
func (r *run) checkUpstream(evs []events.Event, recs []apisim.Record, submits map[string]int) []Violation {
	family := map[string]string{}
	members, explainedPaid := map[string]int{}, map[string]int{}
	for _, j := range r.ran(evs) {
		family[j.id] = j.family
		members[j.family]++
		explainedPaid[j.family] += max(1, submits[j.id])
	}
	owner := map[string]string{}
	paid := map[string]int{}
	for _, rec := range recs {
		owner[rec.ID] = familyOf(rec)
		paid[familyOf(rec)]++
	}
	endedJobs, explained := map[string]map[string]bool{}, map[string]bool{}
	var out []Violation
	for _, e := range evs {
		d := e.Data
		if d.Upstream != nil {
			for _, id := range []string{d.Upstream.TaskID, d.Upstream.JobID, d.Upstream.InstanceID} {
				if f, ok := owner[id]; ok && id != "" && f != family[d.JobID] {
					out = append(out, Violation{invForeignID, d.JobID, fmt.Sprintf("its %s event reports %s, created for %s", d.Status, id, f)})
				}
			}
		}
		if terminal(d.Status) {
			f := family[d.JobID]
			if endedJobs[f] == nil {
				endedJobs[f] = map[string]bool{}
			}
			endedJobs[f][d.JobID] = true
			explained[family[d.JobID]] = explained[family[d.JobID]] || (d.Error != nil && strings.Contains(d.Error.Code, explainedAliveErr))
		}
	}
	for f, n := range paid {
		if n > explainedPaid[f] {
			out = append(out, Violation{invOnePaidSubmit, f, fmt.Sprintf("%d paid submits for %d job(s), %d counted by their records", n, members[f], explainedPaid[f])})
		} else if n > members[f] {
			r.t.Logf("seed %d: %s: %d paid submits, explained: its record counts them (the submit window)", r.seed, f, n)
		}
	}
	for _, rec := range recs {
		f := familyOf(rec)
		if rec.Alive && len(endedJobs[f]) == members[f] && !explained[f] {
			out = append(out, Violation{invAliveAfterEnd, f, fmt.Sprintf("%s %s still alive", rec.Kind, rec.ID)})
		}
	}
	return out
}

// ran is the schedule's jobs but the pipelines' steps their pipeline's
// terminal event shows never published (skipped, waiting, or reused from
// the run a retry retries): those pay nothing and end nothing, which
// checkPipelines checks.
func (r *run) ran(evs []events.Event) []job {
	unrun := map[string]bool{}
	for _, e := range evs {
		if e.Data.Kind != "pipeline" || !terminal(e.Data.Status) {
			continue
		}
		for _, s := range e.Data.Steps {
			if s.Status == "skipped" || s.Status == "waiting" || s.Reused {
				unrun[e.Data.JobID+"--"+s.Name] = true
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []job
	for _, j := range r.jobs {
		if !unrun[j.id] {
			out = append(out, j)
		}
	}
	return out
}

// checkPipelines: each pipeline's terminal event against its steps'. A
// step it shows skipped or waiting, or reused from the run a retry
// retries, was never published: its job has no record and no terminal
// event (what it would pay is counted with its family by checkUpstream;
// a retried pipeline's steps share their prompts with the original's);
// every other has exactly one terminal event, with the status the
// pipeline shows; a pipeline that succeeded shows every step succeeded.
// recorded holds the jobs with a record.
func (r *run) checkPipelines(evs []events.Event, recorded map[string]int) []Violation {
	ends := map[string][]string{}
	var pipelines []events.Event
	for _, e := range evs {
		if !terminal(e.Data.Status) {
			continue
		}
		ends[e.Data.JobID] = append(ends[e.Data.JobID], e.Data.Status)
		if e.Data.Kind == "pipeline" {
			pipelines = append(pipelines, e)
		}
	}
	var out []Violation
	for _, p := range pipelines {
		for _, s := range p.Data.Steps {
			own := p.Data.JobID + "--" + s.Name
			_, ran := recorded[own]
			switch {
			case s.Status == "skipped" || s.Status == "waiting" || s.Reused:
				if len(ends[own]) > 0 || ran {
					out = append(out, Violation{invStepOnce, own, fmt.Sprintf("shown %s (reused %v) by %s, yet it has %d terminal events and a record: %v", s.Status, s.Reused, p.Data.JobID, len(ends[own]), ran)})
				}
			case len(ends[s.JobID]) != 1:
				out = append(out, Violation{invStepOnce, s.JobID, fmt.Sprintf("%d terminal events %v", len(ends[s.JobID]), ends[s.JobID])})
			case ends[s.JobID][0] != string(s.Status):
				out = append(out, Violation{invStepAgrees, s.JobID, fmt.Sprintf("ended %s, shown %s by %s", ends[s.JobID][0], s.Status, p.Data.JobID)})
			}
			if p.Data.Status == "succeeded" && s.Status != "succeeded" {
				out = append(out, Violation{invStepAgrees, p.Data.JobID, fmt.Sprintf("succeeded with step %s %s", s.Name, s.Status)})
			}
		}
	}
	return out
}
