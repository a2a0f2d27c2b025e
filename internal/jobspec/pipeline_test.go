package jobspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// pipelineDoc returns the pipeline example with its steps replaced by
// steps, each a JSON object.
func pipelineDoc(t *testing.T, steps ...string) string {
	t.Helper()
	return `{"id":"p-1","kind":"pipeline","pipeline":{"steps":[` + strings.Join(steps, ",") + `]}}`
}

// speechStep is a valid step named name needing needs.
func speechStep(name string, needs ...string) string {
	n, _ := json.Marshal(needs)
	if len(needs) == 0 {
		n = []byte("[]")
	}
	return fmt.Sprintf(`{"name":%q,"needs":%s,"spec":{"kind":"speech","speech":{"model":"m","input":{"text":"hi","voice":"v"}}}}`, name, n)
}

// containerStep is a valid container step whose one input is from.
func containerStep(name, needs, from string) string {
	return fmt.Sprintf(`{"name":%q,"needs":%s,"spec":{"kind":"container","container":{
 "instance":{"image":"reg:5000/a/b:1","version":"b:1","accelerator":"gpu","resource_group":"g","cpus":1,"gpus":1,"ram_mb":1024,"timeout":"01:00:00"},
 "script":"true\n","inputs":[{"from":%s,"to":"/public/home/u/in"}],"outputs":["/public/home/u/out/model.bin"]}}}`, name, needs, from)
}

func TestPipelineExample(t *testing.T) {
	t.Parallel()
	s, err := Decode(readExample(t, "pipeline"), KindPipeline)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Pipeline
	if p == nil || len(p.Steps) != 3 || p.OnFailure != OnFailureStop {
		t.Fatalf("pipeline = %+v", p)
	}
	render := p.Steps[2]
	if render.Name != "render" || len(render.Needs) != 2 || render.Spec.Kind != KindContainer {
		t.Fatalf("render = %+v", render)
	}
	in := render.Spec.Container.Inputs[0]
	if in.Ref == nil || in.Ref.Step != "train" || in.Ref.Artifact != "model.bin" || in.From != "" {
		t.Errorf("render input 0 = %+v", in)
	}
	if got := StepID("promo-42", "render"); got != "promo-42--render" {
		t.Errorf("StepID = %q", got)
	}
	if got := p.Order(); strings.Join(got, ",") != "voice,train,render" {
		t.Errorf("Order = %v", got)
	}
}

// pipelineInvalidCase is a pipeline that breaks one rule, and the problem
// it must give.
type pipelineInvalidCase struct {
	name, doc, path, rule string
}

func pipelineInvalidCases(t *testing.T) []pipelineInvalidCase {
	ref := func(step, art string) string { return fmt.Sprintf(`{"step":%q,"artifact":%q}`, step, art) }
	many := make([]string, MaxPipelineSteps+1)
	for i := range many {
		many[i] = speechStep(fmt.Sprintf("s%d", i))
	}
	return []pipelineInvalidCase{
		{"no pipeline section", `{"id":"p-1","kind":"pipeline"}`, "pipeline", "required when kind is pipeline"},
		{"no steps", pipelineDoc(t), "pipeline.steps", "at least one step"},
		{"too many steps", pipelineDoc(t, many...), "pipeline.steps", "at most 100 steps, got 101"},
		{"duplicate name", pipelineDoc(t, speechStep("a"), speechStep("a")), "pipeline.steps[1].name", `duplicate step name "a"`},
		{"bad name", pipelineDoc(t, speechStep("a b")), "pipeline.steps[0].name", "must match"},
		{"unknown needs", pipelineDoc(t, speechStep("a", "ghost")), "pipeline.steps[0].needs[0]", `unknown step "ghost"`},
		{"misspelt needs", pipelineDoc(t, speechStep("train"), speechStep("a", "trian")), "pipeline.steps[1].needs[0]", `unknown step "trian"; did you mean "train"?`},
		{"misspelt field", pipelineDoc(t, `{"name":"a","need":[],"spec":{"kind":"speech","speech":{"model":"m","input":{"text":"hi","voice":"v"}}}}`), "pipeline.steps[0].need", `unknown field; did you mean "needs"?`},
		{"needs itself", pipelineDoc(t, speechStep("a", "a")), "pipeline.steps[0].needs[0]", "cycle: a -> a"},
		{"cycle", pipelineDoc(t, speechStep("a", "c"), speechStep("b", "a"), speechStep("c", "b")), "pipeline.steps[0].needs", "cycle: a -> c -> b -> a"},
		{"needs twice", pipelineDoc(t, speechStep("a"), speechStep("b", "a", "a")), "pipeline.steps[1].needs[1]", `"a" listed twice`},
		{"bad on_failure", `{"id":"p-1","kind":"pipeline","pipeline":{"on_failure":"later","steps":[` + speechStep("a") + `]}}`, "pipeline.on_failure", "must be stop or finish"},
		{"step spec invalid", pipelineDoc(t, `{"name":"a","spec":{"kind":"speech","speech":{"model":"","input":{"text":"hi","voice":"v"}}}}`), "pipeline.steps[0].spec.speech.model", "required"},
		{"step spec unknown field", pipelineDoc(t, `{"name":"a","spec":{"kind":"speech","speach":{}}}`), "pipeline.steps[0].spec.speach", "unknown field"},
		{"step without spec", pipelineDoc(t, `{"name":"a"}`), "pipeline.steps[0].spec", "required"},
		{"step is a pipeline", pipelineDoc(t, `{"name":"a","spec":{"kind":"pipeline","pipeline":{"steps":[`+speechStep("x")+`]}}}`), "pipeline.steps[0].spec.kind", "a step cannot be a pipeline"},
		{"step with id", pipelineDoc(t, `{"name":"a","spec":{"id":"x","kind":"speech","speech":{"model":"m","input":{"text":"hi","voice":"v"}}}}`), "pipeline.steps[0].spec.id", "must be absent"},
		{"id too long for a step", `{"id":"` + strings.Repeat("p", 120) + `","kind":"pipeline","pipeline":{"steps":[` + speechStep("longname") + `]}}`, "pipeline.steps[0].name", "step id"},
		{"ref to unknown step", pipelineDoc(t, containerStep("r", `[]`, ref("ghost", "x"))), "pipeline.steps[0].spec.container.inputs[0].from.step", `unknown step "ghost"`},
		{"ref to a step not needed", pipelineDoc(t, speechStep("a"), containerStep("r", `[]`, ref("a", "result-0"))), "pipeline.steps[1].spec.container.inputs[0].from.step", "needs"},
		{"ref to an artifact not produced", pipelineDoc(t, containerStep("a", `[]`, `"s3://b-1/k"`), containerStep("r", `["a"]`, ref("a", "weights.bin"))), "pipeline.steps[1].spec.container.inputs[0].from.artifact", `"a" does not produce "weights.bin"`},
		{"ref to a media result not produced", pipelineDoc(t, speechStep("a"), containerStep("r", `["a"]`, ref("a", "model.bin"))), "pipeline.steps[1].spec.container.inputs[0].from.artifact", "result-<n>"},
		{"ref with unknown field", pipelineDoc(t, speechStep("a"), containerStep("r", `["a"]`, `{"step":"a","artifact":"result-0","x":1}`)), "pipeline.steps[1].spec.container.inputs[0].from.x", "unknown field"},
		{"ref outside a pipeline", `{"kind":"container","container":{"instance":{"image":"reg:5000/a/b:1","version":"b:1","accelerator":"gpu","resource_group":"g","cpus":1,"gpus":1,"ram_mb":1024,"timeout":"01:00:00"},"script":"true\n","inputs":[{"from":` + ref("a", "b") + `,"to":"/public/home/u/in"}]}}`, "container.inputs[0].from", "only in a pipeline step"},
		{"pipeline section on a video", `{"kind":"speech","speech":{"model":"m","input":{"text":"hi","voice":"v"}},"pipeline":{"steps":[]}}`, "pipeline", "must be absent when kind is speech"},
	}
}

// TestPipelineInvalid checks that every graph error is one problem naming
// the step's field, and that a step spec gets the ordinary validation.
func TestPipelineInvalid(t *testing.T) {
	t.Parallel()
	for _, tt := range pipelineInvalidCases(t) {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode([]byte(tt.doc), "")
			var se *Error
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalidSpec) {
				t.Fatalf("Decode = %v, want an *Error", err)
			}
			for _, p := range se.Problems {
				if p.Path == tt.path && strings.Contains(p.Rule, tt.rule) {
					return
				}
			}
			t.Errorf("problems %v lack %s: ...%s...", se.Problems, tt.path, tt.rule)
		})
	}
}

// TestPipelineValidGraphs accepts references along needs, through an
// intermediate step, and to the files every compute step produces.
func TestPipelineValidGraphs(t *testing.T) {
	t.Parallel()
	ref := func(step, art string) string { return fmt.Sprintf(`{"step":%q,"artifact":%q}`, step, art) }
	docs := map[string]string{
		"diamond": pipelineDoc(t, speechStep("a"), speechStep("b", "a"), speechStep("c", "a"), speechStep("d", "b", "c")),
		"transitive ref": pipelineDoc(t, containerStep("a", `[]`, `"s3://b-1/k"`), speechStep("b", "a"),
			containerStep("c", `["b"]`, ref("a", "model.bin"))),
		"stdout of a container":       pipelineDoc(t, containerStep("a", `[]`, `"s3://b-1/k"`), containerStep("c", `["a"]`, ref("a", "stdout.txt"))),
		"media result with extension": pipelineDoc(t, speechStep("a"), containerStep("c", `["a"]`, ref("a", "result-0.mp3"))),
		"finish":                      `{"kind":"pipeline","pipeline":{"on_failure":"finish","steps":[` + speechStep("a") + `]}}`,
	}
	for name, doc := range docs {
		if _, err := Decode([]byte(doc), KindPipeline); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// pipelineSchemaCannotExpress names the pipeline cases only Go rejects.
var pipelineSchemaCannotExpress = map[string]bool{
	"duplicate name": true, "unknown needs": true, "misspelt needs": true, "needs itself": true, "cycle": true,
	"id too long for a step": true, "ref to unknown step": true, "ref to a step not needed": true,
	"ref to an artifact not produced": true, "ref to a media result not produced": true,
	"ref outside a pipeline": true,
}

// TestPipelineSchema checks the JSON Schema against the pipeline cases:
// it rejects every structural error and only those.
func TestPipelineSchema(t *testing.T) {
	t.Parallel()
	sch := compileSchema(t, "jobspec.schema.json")
	for _, tt := range pipelineInvalidCases(t) {
		err := schemaAccepts(sch, []byte(tt.doc))
		switch gap := pipelineSchemaCannotExpress[tt.name]; {
		case gap && err != nil:
			t.Errorf("schema rejects %q after all: %v", tt.name, err)
		case !gap && err == nil:
			t.Errorf("schema accepts invalid case %q", tt.name)
		}
	}
}

// TestPipelineHintsOnlyValidNames: a need that misses only because the
// step it names has an invalid name gets no "did you mean" of that
// invalid name: the name's own problem says what to fix.
func TestPipelineHintsOnlyValidNames(t *testing.T) {
	t.Parallel()
	_, err := Decode([]byte(pipelineDoc(t, speechStep("voice over"), speechStep("a", "voice"))), "")
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("Decode = %v, want an *Error", err)
	}
	for _, p := range se.Problems {
		if strings.Contains(p.Rule, "did you mean") {
			t.Errorf("%s: %s", p.Path, p.Rule)
		}
	}
}
