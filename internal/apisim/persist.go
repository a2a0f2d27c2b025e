package apisim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// A simulator with a state file (MediaConfig.StateFile,
// ComputeConfig.StateFile) keeps the records of what it accepted there,
// rewritten after each change, and reads them back when it starts: a
// restarted simulator (the dev worker's, SLUICE_DEV) still knows the
// tasks, jobs and container instances a resumed job asks about, and their
// clocks go on from their recorded times.

// saveJSON writes v to path through a temporary file and a rename, so a
// crash leaves the old file or the new one, never half of one.
func saveJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadJSON reads path into v; a missing file leaves v as it is.
func loadJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("apisim: state file %s: %w (remove it to start afresh)", path, err)
	}
	return nil
}

// computeState is the compute simulator's state file: its jobs, and in
// platform mode its container instances with the counters the tests and
// the chaos verdict read (created, deleted, names that had two alive).
type computeState struct {
	NextJob      int64            `json:"next_job"`
	Submits      map[string]int64 `json:"submits"`
	Jobs         []savedJob       `json:"jobs"`
	NextInstance int              `json:"next_instance,omitempty"`
	Instances    []savedInstance  `json:"instances,omitempty"`
	Created      int64            `json:"instances_created,omitempty"`
	Deleted      int64            `json:"instances_deleted,omitempty"`
	TwiceAlive   []string         `json:"twice_alive,omitempty"`
	Creates      map[string]int64 `json:"instance_creates,omitempty"`
}

type savedJob struct {
	ID           string        `json:"id"`
	Name         string        `json:"name"`
	Queue        string        `json:"queue"`
	ClusterID    string        `json:"cluster_id"`
	WorkDir      string        `json:"work_dir"`
	Script       string        `json:"script"`
	Stdout       string        `json:"stdout"`
	Stderr       string        `json:"stderr"`
	Nodes        int           `json:"nodes"`
	PPN          int           `json:"ppn"`
	Wall         string        `json:"wall"`
	SubmitType   string        `json:"submit_type"`
	Lines        []string      `json:"lines"`
	SubmitAt     time.Time     `json:"submit_at"`
	QueuedFor    time.Duration `json:"queued_for"`
	RunFor       time.Duration `json:"run_for"`
	Vanish       bool          `json:"vanish"`
	GPUs         int           `json:"gpus"`
	DCUs         int           `json:"dcus"`
	NodeFail     bool          `json:"node_fail"`
	LagFail      bool          `json:"lag_fail"`
	DetailErrors int           `json:"detail_errors"`
	Phase        string        `json:"phase"`
	ExitCode     int           `json:"exit_code"`
	Cause        string        `json:"cause"`
	EndedAt      time.Time     `json:"ended_at"`
}

type savedInstance struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	ClusterID   string         `json:"cluster_id"`
	Status      string         `json:"status"`
	Request     map[string]any `json:"request"`
	Created     time.Time      `json:"created"`
	WaitFor     time.Duration  `json:"wait_for"`
	Deploy      time.Duration  `json:"deploy"`
	RunFor      time.Duration  `json:"run_for"`
	Timeout     time.Duration  `json:"timeout"`
	DeployFail  bool           `json:"deploy_fail"`
	Complete    bool           `json:"complete"`
	WorkDir     string         `json:"work_dir"`
	Body        []string       `json:"body"`
	Stdout      string         `json:"stdout"`
	Stderr      string         `json:"stderr"`
	ExitFile    string         `json:"exit_file"`
	ScriptEnded bool           `json:"script_ended"`
	ExitCode    int            `json:"exit_code"`
	EndTime     time.Time      `json:"end_time"`
}

// save writes the state file with the jobs as they are, if there is a
// file; call with c.mu held. A failed write is counted
// ("state:save_failed"): the simulator goes on in memory.
func (c *Compute) save() {
	if c.cfg.StateFile == "" {
		return
	}
	jobs := make([]savedJob, 0, len(c.jobs))
	for _, j := range c.jobs {
		jobs = append(jobs, savedJob{
			ID: j.id, Name: j.name, Queue: j.queue, ClusterID: j.cluster.id, WorkDir: j.workDir, Script: j.script,
			Stdout: j.stdout, Stderr: j.stderr, Nodes: j.nodes, PPN: j.ppn, Wall: j.wall, SubmitType: j.submitType,
			Lines: j.lines, SubmitAt: j.submitAt, QueuedFor: j.queuedFor, RunFor: j.runFor, Vanish: j.vanish,
			GPUs: j.gpus, DCUs: j.dcus, NodeFail: j.nodeFail, LagFail: j.lagFail, DetailErrors: j.detailErrors,
			Phase: j.phase, ExitCode: j.exitCode, Cause: j.cause, EndedAt: j.endedAt,
		})
	}
	c.writeState(func(st *computeState) {
		st.NextJob, st.Submits, st.Jobs = c.nextJob, maps.Clone(c.submits), jobs
	})
}

// saveInstances writes the state file with the container instances as
// they are, if there is a file; call with c.ctr.mu held.
func (c *Compute) saveInstances() {
	if c.cfg.StateFile == "" {
		return
	}
	s := c.ctr
	list := make([]savedInstance, 0, len(s.instances))
	for _, in := range s.instances {
		list = append(list, savedInstance{
			ID: in.id, Name: in.name, ClusterID: in.cluster, Status: in.status, Request: in.req, Created: in.created,
			WaitFor: in.waitFor, Deploy: in.deploy, RunFor: in.runFor, Timeout: in.timeout, DeployFail: in.deployFail,
			Complete: in.complete, WorkDir: in.workDir, Body: in.body, Stdout: in.stdout, Stderr: in.stderr,
			ExitFile: in.exitFile, ScriptEnded: in.scriptEnded, ExitCode: in.exitCode, EndTime: in.endTime,
		})
	}
	twice := slices.Sorted(maps.Keys(s.twice))
	created, deleted := c.counters.Get("instances:created"), c.counters.Get("instances:deleted")
	creates := maps.Clone(s.creates)
	c.writeState(func(st *computeState) {
		st.NextInstance, st.Instances, st.Created, st.Deleted, st.TwiceAlive = s.next, list, created, deleted, twice
		st.Creates = creates
	})
}

// writeState applies set to the saved state and writes it.
func (c *Compute) writeState(set func(*computeState)) {
	c.saved.mu.Lock()
	defer c.saved.mu.Unlock()
	set(&c.saved.st)
	if err := saveJSON(c.cfg.StateFile, c.saved.st); err != nil {
		c.counters.Add("state:save_failed", 1)
	}
}

// load reads the state file, if any, into the new simulator.
func (c *Compute) load() error {
	if c.cfg.StateFile == "" {
		return nil
	}
	var st computeState
	if err := loadJSON(c.cfg.StateFile, &st); err != nil {
		return err
	}
	c.saved.st = st
	c.nextJob = max(c.nextJob, st.NextJob)
	for name, n := range st.Submits {
		c.submits[name] = n
	}
	cluster := func(what, id, clusterID string) (*simCluster, error) {
		for _, x := range c.clusters {
			if x.id == clusterID {
				return x, nil
			}
		}
		return nil, fmt.Errorf("apisim: state file %s: %s %s is on unknown cluster %q", c.cfg.StateFile, what, id, clusterID)
	}
	for _, s := range st.Jobs {
		cl, err := cluster("job", s.ID, s.ClusterID)
		if err != nil {
			return err
		}
		c.jobs[s.ID] = &simJob{
			id: s.ID, name: s.Name, queue: s.Queue, cluster: cl, workDir: s.WorkDir, script: s.Script,
			stdout: s.Stdout, stderr: s.Stderr, nodes: s.Nodes, ppn: s.PPN, wall: s.Wall, submitType: s.SubmitType,
			lines: s.Lines, submitAt: s.SubmitAt, queuedFor: s.QueuedFor, runFor: s.RunFor, vanish: s.Vanish,
			gpus: s.GPUs, dcus: s.DCUs, nodeFail: s.NodeFail, lagFail: s.LagFail, detailErrors: s.DetailErrors,
			phase: s.Phase, exitCode: s.ExitCode, cause: s.Cause, endedAt: s.EndedAt,
		}
		if j := c.jobs[s.ID]; j.endedAt.IsZero() && (j.phase == simSucceeded || j.phase == simFailed) {
			// Saved before jobs recorded their end.
			j.endedAt = j.endAt()
		}
	}
	if len(st.Instances) > 0 && c.ctr == nil {
		return fmt.Errorf("apisim: state file %s: it holds container instances, which the letter mode has no service for", c.cfg.StateFile)
	}
	if c.ctr == nil {
		return nil
	}
	s := c.ctr
	s.next = max(s.next, st.NextInstance)
	for _, v := range st.Instances {
		if _, err := cluster("instance", v.ID, v.ClusterID); err != nil {
			return err
		}
		s.instances[v.ID] = &simInstance{
			id: v.ID, name: v.Name, cluster: v.ClusterID, status: v.Status, req: v.Request, created: v.Created,
			waitFor: v.WaitFor, deploy: v.Deploy, runFor: v.RunFor, timeout: v.Timeout, deployFail: v.DeployFail,
			complete: v.Complete, workDir: v.WorkDir, body: v.Body, stdout: v.Stdout, stderr: v.Stderr,
			exitFile: v.ExitFile, scriptEnded: v.ScriptEnded, exitCode: v.ExitCode, endTime: v.EndTime,
		}
		s.alive[v.Name]++
	}
	for _, name := range st.TwiceAlive {
		s.twice[name] = true
	}
	maps.Copy(s.creates, st.Creates)
	c.counters.Add("instances:created", st.Created)
	c.counters.Add("instances:deleted", st.Deleted)
	return nil
}

// mediaState is the media simulator's state file.
type mediaState struct {
	Submits map[string]int64 `json:"submits"`
	Tasks   []savedTask      `json:"tasks"`
}

type savedTask struct {
	ID           string          `json:"id"`
	Speech       bool            `json:"speech"`
	Created      time.Time       `json:"created"`
	PendingFor   time.Duration   `json:"pending_for"`
	Duration     time.Duration   `json:"duration"`
	Cancelled    time.Time       `json:"cancelled"`
	Seen         int             `json:"seen"`
	ShownRunning bool            `json:"shown_running"`
	Usage        map[string]any  `json:"usage"`
	D            savedDirectives `json:"directives"`
}

type savedDirectives struct {
	Fail        bool           `json:"fail"`
	FailCode    string         `json:"fail_code"`
	Duration    *time.Duration `json:"duration"`
	Pending     *time.Duration `json:"pending"`
	Size        int64          `json:"size"`
	Count       int            `json:"count"`
	ResultURL   string         `json:"result_url"`
	ResultCut   bool           `json:"result_cut"`
	WAV         bool           `json:"wav"`
	Frames      int            `json:"frames"`
	SSECut      bool           `json:"sse_cut"`
	SSEAbort    bool           `json:"sse_abort"`
	ForceOK     bool           `json:"force_ok"`
	ForceFail   bool           `json:"force_fail"`
	ShowRunning bool           `json:"show_running"`
}

// save writes the state file, if any; call with m.mu held. A failed write
// is counted ("state:save_failed"): the simulator goes on in memory.
func (m *Media) save() {
	if m.cfg.StateFile == "" {
		return
	}
	st := mediaState{Submits: m.submits, Tasks: make([]savedTask, 0, len(m.tasks))}
	for _, t := range m.tasks {
		d := t.d
		st.Tasks = append(st.Tasks, savedTask{
			ID: t.id, Speech: t.speech, Created: t.created, PendingFor: t.pendingFor, Duration: t.duration,
			Cancelled: t.cancelled, Seen: t.seen, ShownRunning: t.shownRunning, Usage: t.usage,
			D: savedDirectives{
				Fail: d.fail, FailCode: d.failCode, Duration: d.duration, Pending: d.pending, Size: d.size, Count: d.count,
				ResultURL: d.resultURL, ResultCut: d.resultCut, WAV: d.wav, Frames: d.frames, SSECut: d.sseCut,
				SSEAbort: d.sseAbort, ForceOK: d.forceOK, ForceFail: d.forceFail, ShowRunning: d.showRunning,
			},
		})
	}
	if err := saveJSON(m.cfg.StateFile, st); err != nil {
		m.counters.Add("state:save_failed", 1)
	}
}

// load reads the state file, if any, into the new simulator.
func (m *Media) load() error {
	if m.cfg.StateFile == "" {
		return nil
	}
	var st mediaState
	if err := loadJSON(m.cfg.StateFile, &st); err != nil {
		return err
	}
	for k, n := range st.Submits {
		m.submits[k] = n
	}
	for _, s := range st.Tasks {
		d := s.D
		m.tasks[s.ID] = &simTask{
			id: s.ID, speech: s.Speech, created: s.Created, pendingFor: s.PendingFor, duration: s.Duration,
			cancelled: s.Cancelled, seen: s.Seen, shownRunning: s.ShownRunning, usage: s.Usage,
			d: directives{
				fail: d.Fail, failCode: d.FailCode, duration: d.Duration, pending: d.Pending, size: d.Size, count: d.Count,
				resultURL: d.ResultURL, resultCut: d.ResultCut, wav: d.WAV, frames: d.Frames, sseCut: d.SSECut,
				sseAbort: d.SSEAbort, forceOK: d.ForceOK, forceFail: d.ForceFail, showRunning: d.ShowRunning,
			},
		}
	}
	return nil
}
