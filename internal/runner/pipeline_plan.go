package runner

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// CodeStepFailed is the error code of a pipeline one of whose steps did
// not succeed (docs/pipelines.md).
const CodeStepFailed = "step_failed"

// pipelinePlan is what a pipeline does next, decided by planPipeline from
// its spec, its recorded steps and what their records say now: a pure
// function, so a pipeline resumed after a crash decides the same.
type pipelinePlan struct {
	// steps are the pipeline's steps as its record is to show them.
	steps []state.PipelineStep
	// publish are the steps to publish now (recorded queued first), and
	// unreachable the steps that fail input_unreachable instead, with why.
	publish     []int
	unreachable map[int]string
	// cancel are the steps whose cancel the pipeline asks for now.
	cancel []int
	// done: every step has ended; the pipeline ends with end (nil for
	// success).
	done bool
	end  error
}

// planPipeline decides a pipeline's next move. steps are its recorded
// steps, seen the step records read now (nil when a step has none);
// cancelled: the pipeline's cancel was requested.
func planPipeline(p *jobspec.Pipeline, steps []state.PipelineStep, seen []*state.Record, cancelled bool) pipelinePlan {
	pl := pipelinePlan{steps: slices.Clone(steps), unreachable: map[int]string{}}
	byName := make(map[string]int, len(p.Steps))
	for i, st := range p.Steps {
		byName[st.Name] = i
	}
	for i := range pl.steps {
		observe(&pl.steps[i], seen[i])
	}
	// A step that did not succeed stops the rest under "stop"; under
	// "finish" only what needs it, directly or through others.
	halted := cancelled
	for _, s := range pl.steps {
		if s.Ended() && s.Status != state.StatusSucceeded && s.Status != state.StepSkipped && p.Policy() == jobspec.OnFailureStop {
			halted = true
		}
	}
	for changed := true; changed; {
		changed = false
		for i, st := range p.Steps {
			s := &pl.steps[i]
			if s.Status != state.StepWaiting {
				continue
			}
			switch blocked, ready := needsState(st, pl.steps, byName); {
			case halted || blocked:
				s.Status, changed = state.StepSkipped, true
			case ready:
				if why := missingInput(st, pl.steps, byName); why != "" {
					pl.unreachable[i] = why
					s.Status, changed = state.StatusFailed, true
					s.Error = &state.Error{Code: CodeInputUnreachable, Message: why, Stage: state.StageValidate}
					halted = halted || p.Policy() == jobspec.OnFailureStop
					continue
				}
				s.Status = state.StepQueued
				pl.publish = append(pl.publish, i)
			}
		}
	}
	for i := range pl.steps {
		s := &pl.steps[i]
		if halted && !s.Ended() && !s.CancelSent && s.Status != state.StepWaiting {
			s.CancelSent = true
			pl.cancel = append(pl.cancel, i)
		}
	}
	pl.done = !slices.ContainsFunc(pl.steps, func(s state.PipelineStep) bool { return !s.Ended() })
	if pl.done {
		pl.end = pipelineEnd(pl.steps, cancelled)
	}
	return pl
}

// observe takes a published step's end, artifacts and error from its
// record. The steps in between (received, submitted, running) are left
// to the step's own record: writing each into the pipeline's would cost
// a write of it per checkpoint of every step.
func observe(s *state.PipelineStep, rec *state.Record) {
	if rec == nil || !rec.Status.Terminal() || s.Ended() || s.Status == state.StepWaiting {
		return
	}
	s.Status, s.Artifacts, s.Error = rec.Status, rec.Artifacts, rec.Error
}

// needsState reports whether st can no longer run (a step it needs ended
// without success) and whether it can run now (all of them succeeded).
func needsState(st jobspec.Step, steps []state.PipelineStep, byName map[string]int) (blocked, ready bool) {
	ready = true
	for _, n := range st.Needs {
		s := steps[byName[n]]
		switch {
		case s.Status == state.StatusSucceeded:
		case s.Ended():
			return true, false
		default:
			ready = false
		}
	}
	return false, ready
}

// missingInput names the first artifact reference of st that its step's
// artifacts do not hold, or returns "".
func missingInput(st jobspec.Step, steps []state.PipelineStep, byName map[string]int) string {
	for _, in := range stepInputs(st.Spec) {
		if in.Ref == nil {
			continue
		}
		if _, ok := findArtifact(steps[byName[in.Ref.Step]].Artifacts, in.Ref.Artifact); !ok {
			return fmt.Sprintf("step %q produced no artifact %q", in.Ref.Step, in.Ref.Artifact)
		}
	}
	return ""
}

// stepInputs are the inputs of a compute or container spec.
func stepInputs(s *jobspec.Spec) []jobspec.ComputeInput {
	switch {
	case s.Compute != nil:
		return s.Compute.Inputs
	case s.Container != nil:
		return s.Container.Inputs
	}
	return nil
}

// findArtifact finds the artifact named name: its key's last segment,
// else that without its extension (a media result named result-0); the
// exact name first, so that a.tar is not taken for a.tar.gz.
func findArtifact(arts []state.Artifact, name string) (state.Artifact, bool) {
	if i := slices.IndexFunc(arts, func(a state.Artifact) bool { return path.Base(a.Key) == name }); i >= 0 {
		return arts[i], true
	}
	for _, a := range arts {
		base := path.Base(a.Key)
		if strings.TrimSuffix(base, path.Ext(base)) == name {
			return a, true
		}
	}
	return state.Artifact{}, false
}

// pipelineEnd is how a pipeline whose steps all ended ends: cancelled on
// request, failed when a step did not succeed, else succeeded.
func pipelineEnd(steps []state.PipelineStep, cancelled bool) error {
	if cancelled {
		return errCancelled
	}
	for _, s := range steps {
		if s.Status != state.StatusSucceeded {
			// Name the failure itself rather than what it stopped.
			if i := slices.IndexFunc(steps, func(f state.PipelineStep) bool { return f.Status == state.StatusFailed }); i >= 0 {
				s = steps[i]
			}
			msg := fmt.Sprintf("step %s (job %s) %s", s.Name, s.JobID, s.Status)
			if s.Error != nil {
				msg += ": " + s.Error.Code + ": " + s.Error.Message
			}
			return fail(CodeStepFailed, state.StagePoll, false, "%s", msg)
		}
	}
	return nil
}
