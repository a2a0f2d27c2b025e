package apisim

import (
	"cmp"
	"slices"
	"strings"
)

// Record is one paid upstream object as the simulator holds it: a media
// task, a compute job or a container instance. Owner is what sluice named
// it with (a task's prompt or text, a job's name, an instance's name):
// the test that chose those names knows which sluice job each belongs to.
// Where is a compute job's work directory (jobs may share a name, not a
// directory). Alive is true while it runs or is billed.
type Record struct {
	Kind  string // "task", "job" or "instance"
	ID    string
	Owner string
	Where string
	Alive bool
}

// Records lists the media tasks, sorted by id. A task is alive until it is
// cancelled or its duration has passed.
func (m *Media) Records() []Record {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Record, 0, len(m.tasks))
	for _, t := range m.tasks {
		st := t.status(now)
		alive := st == statusPending || st == statusRunning
		out = append(out, Record{Kind: "task", ID: t.id, Owner: t.owner, Alive: alive})
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Records lists the compute jobs and container instances, sorted by kind
// and id. A job is alive until it ended (cancelled included) or its run's
// time has passed; an instance until it is deleted (it is billed until
// then, whatever its status).
func (c *Compute) Records() []Record {
	now := c.cfg.Now()
	c.mu.Lock()
	out := make([]Record, 0, len(c.jobs))
	for _, j := range c.jobs {
		alive := !j.ended() && now.Before(j.endAt())
		out = append(out, Record{Kind: "job", ID: j.id, Owner: j.name, Where: j.workDir, Alive: alive})
	}
	c.mu.Unlock()
	if c.ctr != nil {
		c.ctr.mu.Lock()
		for _, in := range c.ctr.instances {
			out = append(out, Record{Kind: "instance", ID: in.id, Owner: in.name, Alive: true})
		}
		c.ctr.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Record) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.ID, b.ID))
	})
	return out
}
