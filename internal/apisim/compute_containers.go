package apisim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Endpoint names of the container service (platform mode), for
// Faults.Set and the request counters.
const (
	EndpointContainerResources = "container.resources"
	EndpointContainerCreate    = "container.create"
	EndpointContainerExecute   = "container.execute"
	EndpointContainerDetail    = "container.detail"
	EndpointContainerList      = "container.list"
	EndpointContainerDelete    = "container.delete"
)

// Envelope codes of the container service.
const (
	// ContainerCodeCreateFailed is the platform's "create task error".
	ContainerCodeCreateFailed = "716865"
	// ContainerCodeDeleteFailed is the platform's "delete task failed".
	ContainerCodeDeleteFailed = "716866"
)

// Instance statuses the simulator answers: Waiting as the platform's
// example shows, the other five in the same spelling.
const (
	instWaiting   = "Waiting"
	instDeploying = "Deploying"
	instRunning   = "Running"
	instCompleted = "Completed"
	instFailed    = "Failed"
	instStopped   = "Stopped"
)

// The simulated node resource quota of every resource group.
const (
	simNodeCPUs  = 64
	simNodeGPUs  = 8
	simNodeRAMMB = 512 << 10
)

// containerSim is the container service of the compute simulator
// (platform mode): instances held in memory, moved along lazily by the
// clock like jobs.
//
// An instance waits QueuedFor/2, deploys QueuedFor/2, then runs its start
// script for RunFor ("#SIM runfor" overrides it). The start script is read
// as sluice's wrapper: the SLUICE_WORK_DIR='...' assignment, the quoted
// here-document holding the user's script, and the file names the
// wrapper redirects stdout, stderr and the exit status to; a start script
// without a here-document runs as the user's script itself, with nothing
// written. The user's script uses the jobs' language (echo, exit,
// "#SIM stderr", "#SIM output") plus:
//
//	#SIM deployfail   the instance fails while deploying (nothing runs)
//	#SIM complete     the instance reaches Completed when the script ends
//	                  (it otherwise keeps Running, as an ssh instance does)
//
// When the script ends its stdout and stderr files are written, then its
// exit status file (last). An instance older than its timeoutLimit is
// Stopped, with an endTime; its script, if not ended, writes nothing.
type containerSim struct {
	mu        sync.Mutex
	instances map[string]*simInstance
	next      int
	alive     map[string]int   // instanceServiceName → instances alive
	twice     map[string]bool  // names that had two instances alive at once
	creates   map[string]int64 // instanceServiceName → instances created
	times     map[string]ContainerTimes
	// failCreates, failDeletes: the next so many creates or deletes
	// answer the platform's error envelope.
	failCreates, failDeletes int
	noService                bool
}

type simInstance struct {
	id, name, cluster string
	status            string
	req               map[string]any
	created           time.Time
	waitFor, deploy   time.Duration
	runFor            time.Duration
	timeout           time.Duration // 0 = unlimited
	deployFail        bool
	complete          bool
	workDir           string
	body              []string
	stdout, stderr    string
	exitFile          string
	scriptEnded       bool
	exitCode          int
	endTime           time.Time
}

func (i *simInstance) startAt() time.Time { return i.created.Add(i.waitFor + i.deploy) }
func (i *simInstance) scriptEndAt() time.Time {
	return i.startAt().Add(i.runFor)
}

// registerContainers adds the container routes to mux (platform mode).
func (c *Compute) registerContainers(mux *http.ServeMux) {
	c.ctr = &containerSim{instances: map[string]*simInstance{}, alive: map[string]int{}, twice: map[string]bool{}, creates: map[string]int64{},
		times: map[string]ContainerTimes{}}
	base := "/ai/openapi/v2/instance-service"
	c.handle(mux, "GET "+base+"/resources", EndpointContainerResources, c.containerResources)
	c.handle(mux, "POST "+base+"/task", EndpointContainerCreate, c.containerCreate)
	c.handle(mux, "POST "+base+"/task/actions/execute-script", EndpointContainerExecute, c.containerExecute)
	c.handle(mux, "GET "+base+"/{id}/detail", EndpointContainerDetail, c.containerDetail)
	c.handle(mux, "GET "+base+"/task/list", EndpointContainerList, c.containerList)
	c.handle(mux, "DELETE "+base+"/task", EndpointContainerDelete, c.containerDelete)
}

// SetContainerService turns the container service on (the default) or
// off: off, every /ai/ path answers HTTP 404 without an envelope, as one
// region's gateway does.
func (c *Compute) SetContainerService(on bool) {
	if c.ctr == nil {
		return
	}
	c.ctr.mu.Lock()
	c.ctr.noService = !on
	c.ctr.mu.Unlock()
}

// FailContainerCreates makes the next n creates answer envelope 716865
// (nothing is created).
func (c *Compute) FailContainerCreates(n int) {
	c.ctr.mu.Lock()
	c.ctr.failCreates = n
	c.ctr.mu.Unlock()
}

// FailContainerDeletes makes the next n deletes answer envelope 716866
// (nothing is deleted).
func (c *Compute) FailContainerDeletes(n int) {
	c.ctr.mu.Lock()
	c.ctr.failDeletes = n
	c.ctr.mu.Unlock()
}

// ContainerCounts reports the instances created, deleted and alive (not
// deleted, whatever their status: an instance is billed until deleted).
func (c *Compute) ContainerCounts() (created, deleted, alive int64) {
	if c.ctr == nil {
		return 0, 0, 0
	}
	c.ctr.mu.Lock()
	defer c.ctr.mu.Unlock()
	return c.counters.Get("instances:created"), c.counters.Get("instances:deleted"), int64(len(c.ctr.instances))
}

// ContainersTwiceAlive lists the instance names (sluice derives them from
// the job id) that ever had two instances alive at once.
func (c *Compute) ContainersTwiceAlive() []string {
	if c.ctr == nil {
		return nil
	}
	c.ctr.mu.Lock()
	defer c.ctr.mu.Unlock()
	var out []string
	for n := range c.ctr.twice {
		out = append(out, n)
	}
	return out
}

// ContainerCreates reports how many instances named name were created
// (sluice names an instance after its job).
func (c *Compute) ContainerCreates(name string) int64 {
	if c.ctr == nil {
		return 0
	}
	c.ctr.mu.Lock()
	defer c.ctr.mu.Unlock()
	return c.ctr.creates[name]
}

// ContainerTimes is when the first instance of a name was created and
// when its script ended (zero until it has): the instant the simulated
// run was due to end, not when a poll noticed.
type ContainerTimes struct {
	Created, ScriptEnded time.Time
}

// ContainerTimesOf returns the times of the first instance named name,
// kept after it is deleted (not across a restart).
func (c *Compute) ContainerTimesOf(name string) (ContainerTimes, bool) {
	if c.ctr == nil {
		return ContainerTimes{}, false
	}
	c.ctr.mu.Lock()
	defer c.ctr.mu.Unlock()
	t, ok := c.ctr.times[name]
	return t, ok
}

// ContainerAlive lists the ids of the instances alive.
func (c *Compute) ContainerAlive() []string {
	if c.ctr == nil {
		return nil
	}
	c.ctr.mu.Lock()
	defer c.ctr.mu.Unlock()
	var out []string
	for id := range c.ctr.instances {
		out = append(out, id)
	}
	return out
}

// aiAuthorize answers 404 when the service is off, or the token's region
// has none behind its gateway (ComputeRegionNoAI), else authorizes.
func (c *Compute) aiAuthorize(w http.ResponseWriter, r *http.Request) (*simCluster, bool) {
	c.ctr.mu.Lock()
	off := c.ctr.noService
	c.ctr.mu.Unlock()
	if off {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return nil, false
	}
	cl, ok := c.authorize(w, r)
	if ok && cl.noAI {
		http.Error(w, "404 page not found", http.StatusNotFound)
		return nil, false
	}
	return cl, ok
}

// RemoveImage makes region (a name or an id) hold no copy of the image
// imagePath: a create naming it there answers 716865 and creates
// nothing, as the platform starts an image only in a region that holds
// it (platform-evidence.md section 7, low confidence; the platform's
// answer is not shown). Every other image is in every region.
func (c *Compute) RemoveImage(region, imagePath string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cl := range c.clusters {
		if cl.id == region || cl.name == region {
			if cl.noImages == nil {
				cl.noImages = map[string]bool{}
			}
			cl.noImages[imagePath] = true
		}
	}
}

// imageHeld reports whether cl holds a copy of imagePath.
func (c *Compute) imageHeld(cl *simCluster, imagePath string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !cl.noImages[imagePath]
}

func (c *Compute) containerResources(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.aiAuthorize(w, r); !ok {
		return
	}
	q := r.URL.Query()
	if q.Get("acceleratorType") == "" || q.Get("resourceGroup") == "" {
		writeEnvelopeError(w, http.StatusOK, "10003", "acceleratorType and resourceGroup are required")
		return
	}
	writeOK(w, map[string]any{
		"id": nil, "cpuNumber": simNodeCPUs, "gpuNumber": simNodeGPUs, "memorySize": simNodeRAMMB,
		"nvLimits": simNodeGPUs, "dcuLimits": simNodeGPUs, "mluLimits": simNodeGPUs,
		"resourceGroup": q.Get("resourceGroup"), "userName": nil, "nodeNumber": 1, "maxTime": "unlimited",
	})
}

// requiredCreate are the create fields the platform marks required.
var requiredCreate = []string{"acceleratorType", "cpuNumber", "gpuNumber", "imagePath", "instanceServiceName",
	"ramSize", "resourceGroup", "startScriptActionScope", "taskNumber", "taskType", "timeoutLimit", "useStartScript", "version"}

func (c *Compute) containerCreate(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.aiAuthorize(w, r)
	if !ok {
		return
	}
	var req map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 2<<20)).Decode(&req); err != nil {
		writeEnvelopeError(w, http.StatusOK, "10004", "body is not a JSON object")
		return
	}
	for _, f := range requiredCreate {
		if _, ok := req[f]; !ok {
			writeEnvelopeError(w, http.StatusOK, "10003", "missing parameter "+f)
			return
		}
	}
	timeout := time.Duration(0)
	if tl, _ := req["timeoutLimit"].(string); tl != "unlimited" {
		d, ok := parseHMS(tl)
		if !ok {
			writeEnvelopeError(w, http.StatusOK, "10004", "timeoutLimit must be HH:MM:SS or unlimited")
			return
		}
		timeout = d
	}
	if image, _ := req["imagePath"].(string); !c.imageHeld(cl, image) {
		writeEnvelopeError(w, http.StatusOK, ContainerCodeCreateFailed, "create task error: image "+image+" is not in this region")
		return
	}
	script, _ := req["startScriptContent"].(string)
	if use, _ := req["useStartScript"].(bool); !use {
		script = ""
	}
	now := c.cfg.Now()
	s := c.ctr
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failCreates > 0 {
		s.failCreates--
		writeEnvelopeError(w, http.StatusOK, ContainerCodeCreateFailed, "create task error")
		return
	}
	s.next++
	in := &simInstance{
		id: fmt.Sprintf("inst%028d", s.next), cluster: cl.id, status: instWaiting, req: req, created: now,
		waitFor: c.cfg.QueuedFor / 2, deploy: c.cfg.QueuedFor / 2, runFor: c.cfg.RunFor, timeout: timeout,
	}
	in.name, _ = req["instanceServiceName"].(string)
	in.readStartScript(script)
	s.instances[in.id] = in
	s.alive[in.name]++
	s.creates[in.name]++
	if _, seen := s.times[in.name]; !seen {
		s.times[in.name] = ContainerTimes{Created: now}
	}
	if s.alive[in.name] > 1 {
		s.twice[in.name] = true
	}
	c.counters.Add("instances:created", 1)
	c.saveInstances()
	writeOK(w, in.id)
}

// readStartScript finds the wrapper's parts in script (see containerSim).
func (i *simInstance) readStartScript(script string) {
	lines := strings.Split(script, "\n")
	delim, inBody := "", false
	vars := map[string]string{}
	for _, raw := range lines {
		line := strings.TrimSpace(raw)
		switch {
		case inBody && line == delim:
			inBody = false
		case inBody:
			i.body = append(i.body, raw)
		case strings.HasPrefix(line, "SLUICE_WORK_DIR="):
			i.workDir = strings.Trim(strings.TrimPrefix(line, "SLUICE_WORK_DIR="), `'"`)
			vars["$SLUICE_WORK_DIR"] = i.workDir
		case strings.Contains(line, "<<'"):
			rest := line[strings.Index(line, "<<'")+3:]
			delim, _, _ = strings.Cut(rest, "'")
			inBody = delim != ""
		case strings.Contains(line, ">\"$SLUICE_WORK_DIR/") && strings.Contains(line, "2>"):
			i.stdout, i.stderr = redirectTarget(line, " >"), redirectTarget(line, "2>")
		case strings.HasPrefix(line, "mv -f "):
			f := strings.Fields(line)
			i.exitFile = strings.Trim(f[len(f)-1], `"`)
		}
	}
	expand := func(p string) string {
		if p == "" || i.workDir == "" {
			return ""
		}
		return path.Clean(strings.ReplaceAll(p, "$SLUICE_WORK_DIR", i.workDir))
	}
	i.stdout, i.stderr, i.exitFile = expand(i.stdout), expand(i.stderr), expand(i.exitFile)
	if delim == "" && len(i.body) == 0 {
		i.body = lines
	}
	for _, l := range i.body {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "#SIM" {
			continue
		}
		switch f[1] {
		case "deployfail":
			i.deployFail = true
		case "complete":
			i.complete = true
		case "runfor":
			if len(f) > 2 {
				if d, err := time.ParseDuration(f[2]); err == nil {
					i.runFor = d
				}
			}
		}
	}
}

// redirectTarget returns the quoted path after op in line.
func redirectTarget(line, op string) string {
	k := strings.Index(line, op)
	if k < 0 {
		return ""
	}
	rest := strings.TrimSpace(line[k+len(op):])
	rest = strings.TrimPrefix(rest, `"`)
	p, _, _ := strings.Cut(rest, `"`)
	return p
}

// settleInstances moves every instance along to now, and saves them when
// one changed. The caller holds c.ctr.mu.
func (c *Compute) settleInstances(now time.Time) {
	changed := false
	defer func() {
		if changed {
			c.saveInstances()
		}
	}()
	for _, in := range c.ctr.instances {
		status, ended := in.status, in.scriptEnded
		c.settleInstance(in, now)
		changed = changed || in.status != status || in.scriptEnded != ended
	}
}

// settleInstance moves in along to now.
func (c *Compute) settleInstance(in *simInstance, now time.Time) {
	if in.status == instFailed || in.status == instStopped || in.status == instCompleted {
		return
	}
	if in.timeout > 0 && !now.Before(in.created.Add(in.timeout)) {
		if !in.scriptEnded && !in.deployFail && !in.created.Add(in.timeout).Before(in.scriptEndAt()) {
			c.endScript(in)
		}
		in.status, in.endTime = instStopped, in.created.Add(in.timeout)
		return
	}
	switch {
	case now.Before(in.created.Add(in.waitFor)):
		in.status = instWaiting
	case now.Before(in.startAt()):
		in.status = instDeploying
	case in.deployFail:
		in.status, in.endTime = instFailed, in.startAt()
	default:
		in.status = instRunning
		if !in.scriptEnded && !now.Before(in.scriptEndAt()) {
			c.endScript(in)
			if in.complete {
				in.status, in.endTime = instCompleted, in.scriptEndAt()
			}
		}
	}
}

// endScript runs the user's script and writes its files, the exit status
// last.
func (c *Compute) endScript(in *simInstance) {
	in.scriptEnded = true
	if t, ok := c.ctr.times[in.name]; ok && t.ScriptEnded.IsZero() {
		// A script cut short by the timeout ends with the instance.
		t.ScriptEnded = in.scriptEndAt()
		if stop := in.created.Add(in.timeout); in.timeout > 0 && stop.Before(t.ScriptEnded) {
			t.ScriptEnded = stop
		}
		c.ctr.times[in.name] = t
	}
	var stdout, stderr strings.Builder
	code := 0
lines:
	for _, line := range in.body {
		line = strings.TrimSpace(line)
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "echo":
			stdout.WriteString(strings.TrimSpace(strings.TrimPrefix(line, "echo")) + "\n")
		case f[0] == "exit" || (f[0] == "#SIM" && len(f) > 2 && f[1] == "exit"):
			arg := f[len(f)-1]
			n, err := strconv.Atoi(arg)
			if err != nil {
				n = 2
				fmt.Fprintf(&stderr, "exit: %s: numeric argument required\n", arg)
			}
			code = n
			break lines
		case f[0] == "#SIM" && len(f) > 1 && f[1] == "stderr":
			stderr.WriteString(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "#SIM")), "stderr")) + "\n")
		case f[0] == "#SIM" && len(f) == 4 && f[1] == "output":
			size, ok := parseSize(f[3])
			p := f[2]
			if !path.IsAbs(p) && in.workDir != "" {
				p = path.Join(in.workDir, p)
			}
			if !ok || c.writeFile(p, ComputeOutputBytes(p, size)) != nil {
				fmt.Fprintf(&stderr, "#SIM output %s %s failed\n", f[2], f[3])
				code = 1
				break lines
			}
		}
	}
	in.exitCode = code
	if in.stdout != "" {
		_ = c.writeFile(in.stdout, strings.NewReader(stdout.String()))
	}
	if in.stderr != "" {
		_ = c.writeFile(in.stderr, strings.NewReader(stderr.String()))
	}
	if in.exitFile != "" {
		_ = c.writeFile(in.exitFile, strings.NewReader(strconv.Itoa(code)+"\n"))
	}
}

// instanceOf returns the instance id of the token's cluster, settled.
func (c *Compute) instanceOf(cl *simCluster, id string) *simInstance {
	c.settleInstances(c.cfg.Now())
	in := c.ctr.instances[id]
	if in == nil || in.cluster != cl.id {
		return nil
	}
	return in
}

func (c *Compute) containerExecute(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.aiAuthorize(w, r)
	if !ok {
		return
	}
	var req struct {
		ID                 string `json:"id"`
		StartScriptContent string `json:"startScriptContent"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 2<<20)).Decode(&req); err != nil || req.ID == "" {
		writeEnvelopeError(w, http.StatusOK, "10003", "id is required")
		return
	}
	c.ctr.mu.Lock()
	defer c.ctr.mu.Unlock()
	in := c.instanceOf(cl, req.ID)
	if in == nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeNotFound, "instance does not exist")
		return
	}
	if in.status != instRunning {
		writeEnvelopeError(w, http.StatusOK, "10004", "instance is not running")
		return
	}
	// The platform runs it asynchronously and reports nothing; the
	// simulator runs it at once with the instance's files.
	run := &simInstance{workDir: in.workDir}
	run.readStartScript(req.StartScriptContent)
	c.endScript(run)
	writeOK(w, nil)
}

func (c *Compute) containerDetail(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.aiAuthorize(w, r)
	if !ok {
		return
	}
	c.ctr.mu.Lock()
	defer c.ctr.mu.Unlock()
	in := c.instanceOf(cl, r.PathValue("id"))
	if in == nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeNotFound, "instance does not exist")
		return
	}
	writeOK(w, c.instanceView(in))
}

func (c *Compute) instanceView(in *simInstance) map[string]any {
	var start, end any
	duration := "--"
	if !c.cfg.Now().Before(in.startAt()) && !in.deployFail {
		start = in.startAt().Format(jobTimeLayout)
	}
	if !in.endTime.IsZero() {
		end = in.endTime.Format(jobTimeLayout)
		duration = formatHMS(in.endTime.Sub(in.created))
	}
	v := map[string]any{
		"id": in.id, "instanceServiceName": in.name, "status": in.status,
		"createTime": in.created.Format(jobTimeLayout), "startTime": start, "endTime": end,
		"duration": duration, "remainingTime": "--",
		"resourceSpec": fmt.Sprintf("%v 核心; %v 加速器; %v MB 内存", in.req["cpuNumber"], in.req["gpuNumber"], in.req["ramSize"]),
	}
	for _, k := range []string{"acceleratorType", "resourceGroup", "timeoutLimit", "version", "imagePath", "taskType", "cpuNumber", "gpuNumber", "ramSize", "taskNumber"} {
		v[k] = in.req[k]
	}
	return v
}

func (c *Compute) containerList(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.aiAuthorize(w, r)
	if !ok {
		return
	}
	c.ctr.mu.Lock()
	defer c.ctr.mu.Unlock()
	c.settleInstances(c.cfg.Now())
	list := []map[string]any{}
	for _, in := range c.ctr.instances {
		if in.cluster == cl.id {
			list = append(list, c.instanceView(in))
		}
	}
	writeOK(w, map[string]any{"total": len(list), "list": list})
}

func (c *Compute) containerDelete(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.aiAuthorize(w, r)
	if !ok {
		return
	}
	ids := r.URL.Query()["ids"]
	if len(ids) == 0 {
		writeEnvelopeError(w, http.StatusOK, "10003", "ids is required")
		return
	}
	s := c.ctr
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failDeletes > 0 {
		s.failDeletes--
		writeEnvelopeError(w, http.StatusOK, ContainerCodeDeleteFailed, "delete task failed")
		return
	}
	for _, id := range ids {
		in := s.instances[id]
		if in == nil || in.cluster != cl.id {
			continue // deleting again is no error
		}
		delete(s.instances, id)
		s.alive[in.name]--
		c.counters.Add("instances:deleted", 1)
	}
	c.saveInstances()
	writeOK(w, nil)
}
