package console_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// TestPipelineGraph: a pipeline's page draws its graph as inline SVG:
// one box per step, coloured by its status and linking to its job, and
// one edge per need, each step to the right of every step it needs.
func TestPipelineGraph(t *testing.T) {
	t.Parallel()
	base, _, n := serve(t, token)
	ctx := testenv.Context(t, 30*time.Second)
	kv, err := n.JS.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := n.JS.KeyValue(ctx, contract.SpecsBucket)
	if err != nil {
		t.Fatal(err)
	}
	step := func(name, needs string) string {
		return `{"name":"` + name + `","needs":[` + needs + `],"spec":{"kind":"speech","speech":{"model":"m","input":{"text":"hi","voice":"v"}}}}`
	}
	spec := `{"id":"pl-g","kind":"pipeline","pipeline":{"steps":[` + strings.Join([]string{
		step("a", ""), step("b", `"a"`), step("c", `"a"`), step("d", `"b","c"`)}, ",") + `]}}`
	if _, err := specs.Put(ctx, "pl-g", []byte(spec)); err != nil {
		t.Fatal(err)
	}
	if _, err := state.NewStore(kv, "w1", nil).Update(ctx, "pl-g", func(r *state.Record) error {
		r.Kind, r.Status = "pipeline", state.StatusRunning
		r.Pipeline = &state.Pipeline{Steps: []state.PipelineStep{
			{Name: "a", JobID: "pl-g--a", Status: state.StatusSucceeded},
			{Name: "b", JobID: "pl-g--b", Status: state.StatusFailed},
			{Name: "c", JobID: "pl-g--c", Status: state.StatusRunning},
			{Name: "d", JobID: "pl-g--d", Status: state.StepSkipped},
		}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/console/jobs/pl-g")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	page := string(body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<svg class="pipeline"`) {
		t.Fatalf("GET: %d, no pipeline graph:\n%s", resp.StatusCode, page)
	}
	x := map[string]string{}
	for _, m := range regexp.MustCompile(`<a href="/console/jobs/(pl-g--\w)"[^>]*>\s*<g class="node st-(\w+)"[^>]*>\s*<title>[^<]*</title>\s*<rect x="([0-9.]+)"`).FindAllStringSubmatch(page, -1) {
		x[m[1]] = m[3]
		want := map[string]string{"pl-g--a": "succeeded", "pl-g--b": "failed", "pl-g--c": "running", "pl-g--d": "skipped"}[m[1]]
		if m[2] != want {
			t.Errorf("%s drawn %s, want %s", m[1], m[2], want)
		}
	}
	if len(x) != 4 || x["pl-g--b"] != x["pl-g--c"] || !(num(x["pl-g--a"]) < num(x["pl-g--b"]) && num(x["pl-g--b"]) < num(x["pl-g--d"])) {
		t.Errorf("boxes at %v: want a, then b and c in one column, then d", x)
	}
	if edges := strings.Count(page, `class="edge"`); edges != 4 {
		t.Errorf("%d edges, want 4", edges)
	}
}

func num(s string) float64 {
	var f float64
	for _, c := range s {
		if c == '.' {
			break
		}
		f = f*10 + float64(c-'0')
	}
	return f
}
