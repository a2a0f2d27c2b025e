package console

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/jobspec"
	"github.com/sluice-dev/sluice/internal/state"
)

// The pipeline graph's boxes and gaps, in SVG user units.
const (
	graphBoxW = 150
	graphBoxH = 34
	graphGapX = 50
	graphGapY = 14
	graphPad  = 4
)

// graph is a pipeline drawn by the template as inline SVG, like the spend
// chart: one box per step in columns by depth (each step right of every
// step it needs), one edge per need.
type graph struct {
	Width, Height int
	Nodes         []graphNode
	Edges         []graphEdge
}

// graphNode is one step's box, linking to the step's job.
type graphNode struct {
	Name, JobID, Status string
	X, Y, TextX, TextY  string
	W, H                int
	// Title is shown on hover.
	Title string
}

// graphEdge is a need, from the right side of the needed step's box to
// the left side of the step that needs it.
type graphEdge struct{ X1, Y1, X2, Y2 string }

// pipelineGraph lays out p's steps as steps (the record's) show them; a
// step the record does not name yet is drawn waiting.
func pipelineGraph(p *jobspec.Pipeline, pipelineID string, steps []state.PipelineStep) *graph {
	if p == nil || len(p.Steps) == 0 {
		return nil
	}
	byName := make(map[string]int, len(p.Steps))
	for i, st := range p.Steps {
		byName[st.Name] = i
	}
	depth := make([]int, len(p.Steps))
	for _, name := range p.Order() { // every need before the step needing it
		i := byName[name]
		for _, n := range p.Steps[i].Needs {
			depth[i] = max(depth[i], depth[byName[n]]+1)
		}
	}
	rows := map[int]int{}
	g := &graph{}
	at := make([][2]float64, len(p.Steps))
	for i, st := range p.Steps {
		row := rows[depth[i]]
		rows[depth[i]]++
		x := float64(graphPad + depth[i]*(graphBoxW+graphGapX))
		y := float64(graphPad + row*(graphBoxH+graphGapY))
		at[i] = [2]float64{x, y}
		s := state.PipelineStep{Name: st.Name, JobID: jobspec.StepID(pipelineID, st.Name), Status: state.StepWaiting}
		for _, rs := range steps {
			if rs.Name == st.Name {
				s = rs
			}
		}
		title := fmt.Sprintf("%s: %s (job %s)", s.Name, s.Status, s.JobID)
		if s.Reused {
			title += ", reused from an earlier run"
		}
		if s.Error != nil {
			title += ": " + s.Error.Code
		}
		g.Nodes = append(g.Nodes, graphNode{Name: s.Name, JobID: s.JobID, Status: string(s.Status),
			X: num(x), Y: num(y), TextX: num(x + 8), TextY: num(y + graphBoxH/2 + 4), W: graphBoxW, H: graphBoxH, Title: title})
		g.Width = max(g.Width, int(x)+graphBoxW+graphPad)
		g.Height = max(g.Height, int(y)+graphBoxH+graphPad)
	}
	for i, st := range p.Steps {
		for _, n := range st.Needs {
			from, to := at[byName[n]], at[i]
			g.Edges = append(g.Edges, graphEdge{X1: num(from[0] + graphBoxW), Y1: num(from[1] + graphBoxH/2),
				X2: num(to[0]), Y2: num(to[1] + graphBoxH/2)})
		}
	}
	return g
}
