package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is what a run did and what it found.
type Report struct {
	// Jobs were planned and published.
	Jobs int
	// Succeeded and Failed count terminal outcomes; FailedBy splits the
	// failures by error code. Cancelled is always 0 (nothing is cancelled)
	// unless something is wrong.
	Succeeded, Failed, Cancelled int
	FailedBy                     map[string]int
	// Kills and Restarts count the worker kills and restarts; Faults the
	// other faults injected, by type (FaultNATSRestart, FaultNodeKill,
	// ...).
	Kills, Restarts int
	Faults          map[string]int
	// Recoveries has one entry per fault injected, in order.
	Recoveries []Recovery
	// Duplicates counts second submissions upstream that the state
	// records explain: a worker was killed between the "submitting"
	// checkpoint and the record of the task id.
	Duplicates int
	// Unexplained counts second submissions without such a record.
	Unexplained int
	// Lost jobs have neither a terminal event nor a state record; Stuck
	// jobs have no terminal event; MultiTerminal jobs have more than one.
	Lost, Stuck, MultiTerminal int
	// StuckIDs names the stuck jobs (for a failed run's log).
	StuckIDs []string
	// Orphaned counts the jobs whose message a worker's sweep found below
	// its consumer's ack floor and handed over (not a problem: the sweep
	// recovers them; a figure to watch).
	Orphaned int
	// HeldPastBound counts the jobs a worker's watchdog logged as held in
	// one step longer than the step's bound (watchdog.LogStuck): a figure
	// to watch, 0 when every wait has its bound.
	HeldPastBound int
	// BadArtifacts counts artifacts missing from the store or with other
	// bytes than their event (or the simulator) says.
	BadArtifacts int
	// Leaks counts secrets found in logs, events, dead letters or state.
	Leaks int
	// MediaTaskLimit is the fleet's media quota (0: none set) and
	// PeakMediaTasks the simulator's highest count of media tasks submitted
	// and not yet terminal at once. The peak may pass the limit by the
	// counted Duplicates only: a task paid twice in the submit window runs
	// upstream beside its job's recorded one, unknown to the quota.
	MediaTaskLimit, PeakMediaTasks int
	// ClockOffsets are the workers' clock offsets (Config.ClockOffsets).
	ClockOffsets []time.Duration
	// InstancesCreated, InstancesDeleted and InstancesAlive are the
	// simulator's container instances created, deleted and alive at the
	// end (any alive is a problem: it is billed); TwiceAlive counts the
	// jobs that ever had two instances alive at once (a problem).
	InstancesCreated, InstancesDeleted, InstancesAlive, TwiceAlive int
	// Series are a soak's resource samples of every worker process
	// lifetime (Config.SampleEvery), Growth their verdicts against
	// GrowthBound; every series past its bound is also a problem.
	Series      []Series
	Growth      []Growth
	GrowthBound GrowthBound
	// Elapsed is the time from the first publish to the last terminal
	// event (or the deadline).
	Elapsed time.Duration
	// Seed reproduces the job mix and the kill order.
	Seed uint64
	// Problems describes every broken promise, at most maxProblems of them
	// (ProblemCount has the total).
	Problems     []string
	ProblemCount int
}

const maxProblems = 50

func (r *Report) problem(format string, args ...any) {
	r.ProblemCount++
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// OK reports whether the run kept every promise.
func (r *Report) OK() bool { return r.ProblemCount == 0 }

// String is the run's figures on one line, the last line a run prints.
func (r *Report) String() string {
	var recovered []string
	for _, rec := range r.Recoveries {
		took := rec.Took.Round(100 * time.Millisecond).String()
		if !rec.Recovered {
			took = "never"
		}
		recovered = append(recovered, rec.Fault+":"+took)
	}
	quota := ""
	if r.MediaTaskLimit > 0 {
		quota = fmt.Sprintf(" media_tasks_peak=%d/%d", r.PeakMediaTasks, r.MediaTaskLimit)
	}
	if len(r.ClockOffsets) > 0 {
		var offs []string
		for _, o := range r.ClockOffsets {
			offs = append(offs, o.String())
		}
		quota += " clock_offsets=" + strings.Join(offs, ",")
	}
	if len(r.Series) > 0 {
		judged, exceeded := 0, 0
		for _, g := range r.Growth {
			if g.LaterMax >= 0 {
				judged++
			}
			if g.Exceeded() {
				exceeded++
			}
		}
		quota += fmt.Sprintf(" processes_sampled=%d growth_exceeded=%d/%d", len(r.Series), exceeded, judged)
	}
	return fmt.Sprintf("chaos: jobs=%d succeeded=%d failed=%d (%s) kills=%d restarts=%d faults=%s recovered=%s "+
		"duplicates=%d unexplained=%d lost=%d stuck=%d held_past_bound=%d orphaned=%d multi_terminal=%d bad_artifacts=%d leaks=%d%s "+
		"instances_created=%d instances_deleted=%d instances_alive=%d twice_alive=%d problems=%d elapsed=%s seed=%d",
		r.Jobs, r.Succeeded, r.Failed, formatCounts(r.FailedBy), r.Kills, r.Restarts, formatCounts(r.Faults),
		strings.Join(recovered, ","),
		r.Duplicates, r.Unexplained, r.Lost, r.Stuck, r.HeldPastBound, r.Orphaned, r.MultiTerminal, r.BadArtifacts, r.Leaks, quota,
		r.InstancesCreated, r.InstancesDeleted, r.InstancesAlive, r.TwiceAlive, r.ProblemCount,
		r.Elapsed.Round(time.Second), r.Seed)
}

// formatCounts is "a:1,b:2", sorted by key.
func formatCounts(m map[string]int) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s:%d", k, m[k]))
	}
	return strings.Join(out, ",")
}

// Recovery is how one fault went: when it began (since the run's start),
// how long it lasted (a node down or paused, the network split), and how
// long after its end the jobs stream, the events stream and the state
// bucket had a leader and every replica current again and another job
// had ended.
type Recovery struct {
	Fault      string
	At, Lasted time.Duration
	Took       time.Duration
	Recovered  bool
}

func (r Recovery) String() string {
	if !r.Recovered {
		return fmt.Sprintf("%s at %s (lasted %s): not recovered within %s", r.Fault, r.At.Round(time.Second),
			r.Lasted.Round(100*time.Millisecond), r.Took.Round(time.Second))
	}
	return fmt.Sprintf("%s at %s (lasted %s): recovered %s after", r.Fault, r.At.Round(time.Second),
		r.Lasted.Round(100*time.Millisecond), r.Took.Round(100*time.Millisecond))
}
