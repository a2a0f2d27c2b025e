package jobspec

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/internal/artifacts"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/models"
	"github.com/sluice-dev/sluice/internal/suggest"
)

// MaxPipelineSteps bounds the steps of one pipeline.
const MaxPipelineSteps = 100

// StepSeparator joins a pipeline's id and a step's name into the step's
// job id.
const StepSeparator = "--"

// OnFailure is what a pipeline does when one of its steps fails.
type OnFailure string

// The failure policies (docs/pipelines.md).
const (
	// OnFailureStop skips every step not yet published and fails the
	// pipeline; the default.
	OnFailureStop OnFailure = "stop"
	// OnFailureFinish skips only the steps that need the failed one and
	// lets the independent branches finish.
	OnFailureFinish OnFailure = "finish"
)

// Pipeline is the section of a pipeline spec: its steps, in the order the
// producer wrote them.
type Pipeline struct {
	// OnFailure is stop, finish or empty (stop).
	OnFailure OnFailure `json:"on_failure,omitempty"`
	// Steps has 1 to MaxPipelineSteps steps with distinct names.
	Steps []Step `json:"steps"`
}

// Step is one job of a pipeline.
type Step struct {
	// Name is unique in the pipeline and matches stepNamePattern.
	Name string `json:"name"`
	// Needs names the steps that must succeed before this one starts.
	Needs []string `json:"needs,omitempty"`
	// Spec is the step's job spec, without id: a video, speech, compute
	// or container spec whose inputs may hold artifact references.
	Spec *Spec `json:"spec"`
}

// ArtifactRef names an artifact of an earlier step of the same pipeline.
type ArtifactRef struct {
	// Step is the name of a step the referencing step needs, directly or
	// through others.
	Step string `json:"step"`
	// Artifact is the file name of one of that step's artifacts, as
	// Produces accepts it.
	Artifact string `json:"artifact"`
}

// Policy is p's failure policy, OnFailureStop when unset.
func (p *Pipeline) Policy() OnFailure {
	if p.OnFailure == "" {
		return OnFailureStop
	}
	return p.OnFailure
}

// StepID is the job id of step name of pipeline id: <id>--<name>.
func StepID(pipelineID, name string) string { return pipelineID + StepSeparator + name }

// Order returns the step names so that each comes after every step it
// needs, keeping the written order where the graph allows; p must be valid.
func (p *Pipeline) Order() []string {
	done := make(map[string]bool, len(p.Steps))
	out := make([]string, 0, len(p.Steps))
	for len(out) < len(p.Steps) {
		progressed := false
		for _, st := range p.Steps {
			if !done[st.Name] && !slices.ContainsFunc(st.Needs, func(n string) bool { return !done[n] }) {
				done[st.Name] = true
				out = append(out, st.Name)
				progressed = true
			}
		}
		if !progressed {
			break // a cycle: Validate rejects it
		}
	}
	return out
}

// stepNamePattern is the rule of a step's name: an id, short enough that
// <pipeline id>--<name> has room to be one.
var stepNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$`)

func (p *Pipeline) decode(d *decoder, path string, raw json.RawMessage) bool {
	return d.object(path, raw, map[string]fieldFunc{
		"on_failure": func(p2 string, r json.RawMessage) {
			var s string
			if d.str(p2, r, &s) {
				p.OnFailure = OnFailure(s)
			}
		},
		"steps": func(p2 string, r json.RawMessage) {
			elems, _ := d.array(p2, r)
			p.Steps = make([]Step, len(elems))
			for i, e := range elems {
				p.Steps[i].decode(d, index(p2, i), e)
			}
		},
	})
}

func (st *Step) decode(d *decoder, path string, raw json.RawMessage) {
	d.object(path, raw, map[string]fieldFunc{
		"name": func(p string, r json.RawMessage) { d.str(p, r, &st.Name) },
		"needs": func(p string, r json.RawMessage) {
			elems, _ := d.array(p, r)
			for i, e := range elems {
				var n string
				d.str(index(p, i), e, &n)
				st.Needs = append(st.Needs, n)
			}
		},
		"spec": func(p string, r json.RawMessage) {
			if !d.want(p, r, jsonObject) {
				return
			}
			st.Spec = &Spec{}
			st.Spec.decode(d, p, r)
		},
	})
}

// validate checks the graph and every step's spec; id is the pipeline's
// job id when the spec has one, labels the pipeline's labels.
func (p *Pipeline) validate(ps *problems, path, id string, labels map[string]string, cat *models.Catalog) {
	if !roomForPipelineLabel(labels) {
		ps.add("labels", fmt.Sprintf("at most %d entries in a pipeline: its steps take them and the pipeline label", MaxLabels-1))
	}
	if p.OnFailure != "" && p.OnFailure != OnFailureStop && p.OnFailure != OnFailureFinish {
		ps.add(field(path, "on_failure"), "must be stop or finish")
	}
	steps := field(path, "steps")
	switch n := len(p.Steps); {
	case n == 0:
		ps.add(steps, "required: at least one step")
		return
	case n > MaxPipelineSteps:
		ps.add(steps, fmt.Sprintf("at most %d steps, got %d", MaxPipelineSteps, n))
		return
	}
	byName := p.validateNames(ps, steps, id)
	p.validateNeeds(ps, steps, byName)
	p.validateCycles(ps, steps, byName)
	for i := range p.Steps {
		p.validateStep(ps, index(steps, i), i, byName, cat)
	}
}

// validateNames checks each name and returns the index of each distinct
// valid one.
func (p *Pipeline) validateNames(ps *problems, steps, id string) map[string]int {
	byName := make(map[string]int, len(p.Steps))
	for i, st := range p.Steps {
		name := field(index(steps, i), "name")
		switch first, dup := byName[st.Name]; {
		case st.Name == "":
			ps.add(name, "required (must not be empty)")
		case !stepNamePattern.MatchString(st.Name):
			ps.add(name, "must match "+stepNamePattern.String())
		case dup:
			ps.add(name, fmt.Sprintf("duplicate step name %s (also steps[%d])", quote(st.Name), first))
		case id != "" && !ValidID(StepID(id, st.Name)):
			ps.add(name, fmt.Sprintf("the step id <pipeline id>--<name> must be at most 128 bytes, got %d", len(StepID(id, st.Name))))
		default:
			byName[st.Name] = i
		}
	}
	return byName
}

// stepNames are the pipeline's valid step names (byName's) in order, for
// a hint when a name is misspelt: an invalid name has its own problem.
func (p *Pipeline) stepNames(byName map[string]int) []string {
	var names []string
	for _, st := range p.Steps {
		if _, ok := byName[st.Name]; ok {
			names = append(names, st.Name)
		}
	}
	return names
}

// validateNeeds checks that every need names another known step once.
func (p *Pipeline) validateNeeds(ps *problems, steps string, byName map[string]int) {
	for i, st := range p.Steps {
		needs := field(index(steps, i), "needs")
		for j, n := range st.Needs {
			_, known := byName[n]
			switch {
			case n == st.Name:
				ps.add(index(needs, j), fmt.Sprintf("cycle: %s -> %s", st.Name, st.Name))
			case !known:
				ps.add(index(needs, j), "unknown step "+quote(n)+suggest.Hint(n, p.stepNames(byName)))
			case slices.Index(st.Needs, n) < j:
				ps.add(index(needs, j), quote(n)+" listed twice")
			}
		}
	}
}

// validateCycles reports each cycle of needs once, at the needs of the
// step where the search entered it; a step needing itself is
// validateNeeds' to report.
func (p *Pipeline) validateCycles(ps *problems, steps string, byName map[string]int) {
	const (
		unseen = iota
		open
		closed
	)
	color := make([]int, len(p.Steps))
	var stack []int
	var visit func(i int)
	visit = func(i int) {
		color[i] = open
		stack = append(stack, i)
		for _, n := range p.Steps[i].Needs {
			j, known := byName[n]
			if !known || j == i {
				continue
			}
			switch color[j] {
			case unseen:
				visit(j)
			case open:
				at := slices.Index(stack, j)
				names := make([]string, 0, len(stack)-at+1)
				for _, k := range stack[at:] {
					names = append(names, p.Steps[k].Name)
				}
				names = append(names, p.Steps[j].Name)
				ps.add(field(index(steps, j), "needs"), "cycle: "+strings.Join(names, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		color[i] = closed
	}
	for i := range p.Steps {
		if color[i] == unseen {
			visit(i)
		}
	}
}

// validateStep checks step i's spec with the ordinary rules, then its
// artifact references against the graph.
func (p *Pipeline) validateStep(ps *problems, path string, i int, byName map[string]int, cat *models.Catalog) {
	st := p.Steps[i]
	spec := field(path, "spec")
	switch {
	case st.Spec == nil:
		ps.add(spec, "required")
		return
	case st.Spec.Kind == KindPipeline:
		ps.add(field(spec, "kind"), "a step cannot be a pipeline: add its steps to this one")
		return
	case st.Spec.ID != "":
		ps.add(field(spec, "id"), "must be absent: a step's id is <pipeline id>--<step name>")
	}
	if st.Spec.Labels != nil && !roomForPipelineLabel(st.Spec.Labels) {
		ps.add(field(spec, "labels"), fmt.Sprintf("at most %d entries in a step besides the pipeline label its pipeline sets", MaxLabels-1))
	}
	var own problems
	st.Spec.validateJob(&own, cat)
	ps.addUnder(spec, own)

	ancestors := p.ancestors(i, byName)
	for _, r := range st.Spec.refs() {
		at := subPath(spec, r.path)
		j, known := byName[r.ref.Step]
		switch {
		case r.ref.Step == "":
			ps.add(field(at, "step"), "required (must not be empty)")
		case !known:
			ps.add(field(at, "step"), "unknown step "+quote(r.ref.Step)+suggest.Hint(r.ref.Step, p.stepNames(byName)))
		case !ancestors[j]:
			ps.add(field(at, "step"), fmt.Sprintf("must be a step that %s needs, directly or through others: add %s to its needs", quote(st.Name), quote(r.ref.Step)))
		}
		if r.ref.Artifact == "" {
			ps.add(field(at, "artifact"), "required (must not be empty)")
		} else if known && p.Steps[j].Spec != nil {
			if ok, made := p.Steps[j].Spec.Produces(r.ref.Artifact); !ok {
				ps.add(field(at, "artifact"), fmt.Sprintf("step %s does not produce %s: %s", quote(r.ref.Step), quote(r.ref.Artifact), made))
			}
		}
	}
}

// roomForPipelineLabel reports whether labels, given to a step, leave room
// for the pipeline label (runner.stepSpec), by which the step draws on its
// pipeline's budget reservation.
func roomForPipelineLabel(labels map[string]string) bool {
	n := len(labels)
	if _, ok := labels[contract.LabelPipeline]; ok {
		n--
	}
	if _, ok := labels[contract.LabelRetryOf]; ok {
		n-- // a step does not inherit it
	}
	return n < MaxLabels
}

// ancestors marks every step step i needs, directly or through others.
func (p *Pipeline) ancestors(i int, byName map[string]int) []bool {
	seen := make([]bool, len(p.Steps))
	var walk func(k int)
	walk = func(k int) {
		for _, n := range p.Steps[k].Needs {
			if j, ok := byName[n]; ok && !seen[j] {
				seen[j] = true
				walk(j)
			}
		}
	}
	walk(i)
	return seen
}

// mediaResultPattern matches the artifacts of a video or speech job:
// result-<n>, with or without the extension the result gets.
var mediaResultPattern = regexp.MustCompile(`^result-[0-9]+(\.[A-Za-z0-9]+)?$`)

// Produces reports whether a job of spec s can produce an artifact named
// name, and otherwise says what it produces. A video or speech job
// produces result-<n> files, named with or without their extension; a
// compute or container job its stdout.txt, stderr.txt and one file per
// output (OutputNames).
func (s *Spec) Produces(name string) (bool, string) {
	var outputs []string
	switch s.Kind {
	case KindVideo, KindSpeech:
		return mediaResultPattern.MatchString(name), fmt.Sprintf("a %s step produces result-<n> files (result-0, or result-0 with its extension)", s.Kind)
	case KindCompute:
		if s.Compute != nil {
			outputs = s.Compute.Outputs
		}
	case KindContainer:
		if s.Container != nil {
			outputs = s.Container.Outputs
		}
	default:
		return false, "it produces no artifact"
	}
	names := append([]string{StdoutName, StderrName}, OutputNames(outputs)...)
	return slices.Contains(names, name), "it produces " + strings.Join(names, ", ")
}

// The artifacts every compute and container job stores.
const (
	StdoutName = "stdout.txt"
	StderrName = "stderr.txt"
)

// OutputNames returns the artifact name of each output path: its base,
// sanitized, prefixed with its index when an earlier one (or stdout.txt,
// stderr.txt) took the name.
func OutputNames(outputs []string) []string {
	used := map[string]bool{StdoutName: true, StderrName: true}
	names := make([]string, len(outputs))
	for i, p := range outputs {
		name := artifacts.SanitizeFileName(p)
		if used[name] {
			name = fmt.Sprintf("%d-%s", i, name)
		}
		used[name] = true
		names[i] = name
	}
	return names
}

// specRef is one artifact reference of a spec and the path of its from
// field, relative to the spec.
type specRef struct {
	path string
	ref  *ArtifactRef
}

// refs lists s's artifact references in document order.
func (s *Spec) refs() []specRef {
	var out []specRef
	add := func(section string, inputs []ComputeInput) {
		for i, in := range inputs {
			if in.Ref != nil {
				out = append(out, specRef{field(index(field(section, "inputs"), i), "from"), in.Ref})
			}
		}
	}
	if s.Compute != nil {
		add("compute", s.Compute.Inputs)
	}
	if s.Container != nil {
		add("container", s.Container.Inputs)
	}
	return out
}

// subPath is the path rel (as problems name it) inside parent.
func subPath(parent, rel string) string {
	switch {
	case rel == "":
		return parent
	case strings.HasPrefix(rel, "["):
		return parent + rel
	}
	return parent + "." + rel
}

// addUnder adds the problems of a nested document found at parent.
func (ps *problems) addUnder(parent string, sub problems) {
	for i, p := range sub.list {
		if deps, ok := sub.deps[i]; ok {
			under := make([]string, len(deps))
			for k, d := range deps {
				under[k] = subPath(parent, d)
			}
			ps.addDep(subPath(parent, p.Path), p.Rule, under...)
			continue
		}
		ps.add(subPath(parent, p.Path), p.Rule)
	}
}
