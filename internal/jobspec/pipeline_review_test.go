package jobspec

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestPipelineLabelsLeaveRoomForThePipelineLabel: every step gets the
// label pipeline, so a pipeline (whose labels its steps inherit) or a
// step with 32 other labels is invalid, naming the field; 31 others, or
// 32 of which one is pipeline, are valid.
func TestPipelineLabelsLeaveRoomForThePipelineLabel(t *testing.T) {
	t.Parallel()
	labels := func(n int, pipeline bool) string {
		m := map[string]string{}
		if pipeline {
			m["pipeline"] = "x"
		}
		for i := len(m); i < n; i++ {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	step := func(l string) string {
		return `{"name":"a","spec":{"kind":"speech","labels":` + l + `,"speech":{"model":"m","input":{"text":"hi","voice":"v"}}}}`
	}
	top := func(l string) string {
		return `{"id":"p-1","kind":"pipeline","labels":` + l + `,"pipeline":{"steps":[` + speechStep("a") + `]}}`
	}
	for _, c := range []struct {
		doc, problem string
	}{
		{top(labels(32, false)), "labels: at most 31"},
		{top(labels(31, false)), ""},
		{top(labels(32, true)), ""},
		{pipelineDoc(t, step(labels(32, false))), "pipeline.steps[0].spec.labels: at most 31"},
		{pipelineDoc(t, step(labels(31, false))), ""},
		{pipelineDoc(t, step(labels(32, true))), ""},
	} {
		_, err := Decode([]byte(c.doc), KindPipeline)
		switch {
		case c.problem == "" && err != nil:
			t.Errorf("%s: %v", c.doc, err)
		case c.problem != "" && (err == nil || !strings.Contains(err.Error(), c.problem)):
			t.Errorf("%s: error %v, want %q", c.doc, err, c.problem)
		}
	}
}
