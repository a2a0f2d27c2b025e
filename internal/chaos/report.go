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
	// Kills, Restarts, NATSRestarts and S3Outages count what was done to
	// the system.
	Kills, Restarts, NATSRestarts, S3Outages int
	// Duplicates counts second submissions upstream that the state
	// records explain: a worker was killed between the "submitting"
	// checkpoint and the record of the task id.
	Duplicates int
	// Unexplained counts second submissions without such a record.
	Unexplained int
	// Lost jobs have neither a terminal event nor a state record; Stuck
	// jobs have no terminal event; MultiTerminal jobs have more than one.
	Lost, Stuck, MultiTerminal int
	// BadArtifacts counts artifacts missing from the store or with other
	// bytes than their event (or the simulator) says.
	BadArtifacts int
	// Leaks counts secrets found in logs, events, dead letters or state.
	Leaks int
	// Elapsed is the time from the first publish to the last terminal
	// event (or the deadline).
	Elapsed time.Duration
	// Faults are the figures of every fault injected, in order.
	Faults []FaultFigure
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
	var failed []string
	for _, code := range slices.Sorted(maps.Keys(r.FailedBy)) {
		failed = append(failed, fmt.Sprintf("%s:%d", code, r.FailedBy[code]))
	}
	return fmt.Sprintf("chaos: jobs=%d succeeded=%d failed=%d (%s) kills=%d restarts=%d nats_restarts=%d s3_outages=%d "+
		"duplicates=%d unexplained=%d lost=%d stuck=%d multi_terminal=%d bad_artifacts=%d leaks=%d problems=%d elapsed=%s seed=%d",
		r.Jobs, r.Succeeded, r.Failed, strings.Join(failed, ","), r.Kills, r.Restarts, r.NATSRestarts, r.S3Outages,
		r.Duplicates, r.Unexplained, r.Lost, r.Stuck, r.MultiTerminal, r.BadArtifacts, r.Leaks, r.ProblemCount,
		r.Elapsed.Round(time.Second), r.Seed)
}

// FaultFigure is what one fault did and how the system came back.
type FaultFigure struct {
	Name string
	// At is when the fault began, after the start; Took is how long it
	// lasted (until the node, server or store was back).
	At, Took time.Duration
	// Recovered is when, after the fault began, the system served again
	// as the fault measured it (0: not measured).
	Recovered time.Duration
	// NextTerminal is when, after the fault began, the first job finished
	// after the fault ended (0: none did).
	NextTerminal time.Duration
	// Failed is set when the fault could not be injected.
	Failed bool
}

// String is the fault's figures on one line.
func (f FaultFigure) String() string {
	return fmt.Sprintf("fault %q at=%s took=%s recovered=%s next_terminal=%s failed=%t", f.Name,
		f.At.Round(time.Millisecond), f.Took.Round(time.Millisecond), f.Recovered.Round(time.Millisecond),
		f.NextTerminal.Round(time.Millisecond), f.Failed)
}
