package apisim

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// jobTimeLayout is how the simulator writes job times.
const jobTimeLayout = "2006-01-02 15:04:05"

// maxScriptBytes bounds a scheduler script.
const maxScriptBytes = 1 << 20

// maxOutputBytes bounds one "#SIM output" file.
const maxOutputBytes = 16 << 30

// simZone is the platform's time zone: job times are written in it.
var simZone = time.FixedZone("UTC+8", 8*3600)

// Job phases of the simulator (the "jobs:<phase>" counters).
const (
	simQueued    = "queued"
	simRunning   = "running"
	simSucceeded = "succeeded"
	simFailed    = "failed"
	simCancelled = "cancelled"
	simVanished  = "vanished"
)

// How a job that did not simply complete ended (simJob.cause).
const (
	causeTimeout   = "timeout"   // ran past GAP_WALL_TIME: statT
	causeNodeFail  = "nodefail"  // "#SIM nodefail": statN
	causeLagFail   = "lagfail"   // "#SIM lagfail": statC, JobState FAILED
	causeCancelled = "cancelled" // deleted by the cancel call: statDE
)

// simNode is the node every simulated job runs on.
const simNode = "sim-node01"

// timeoutExit is the exit status of a timed-out job, as a live history
// answer showed it.
const timeoutExit = 10006

// simJob is one submitted job.
type simJob struct {
	id, name, queue   string
	cluster           *simCluster
	workDir, script   string
	stdout, stderr    string
	nodes, ppn        int
	wall              string
	submitType        string
	lines             []string
	submitAt          time.Time
	queuedFor, runFor time.Duration
	vanish            bool
	gpus, dcus        int
	nodeFail, lagFail bool
	detailErrors      int // realtime detail queries after the end that answer 10001

	phase    string
	exitCode int
	cause    string
	endedAt  time.Time // when the job ended; zero while it has not
}

func (j *simJob) startAt() time.Time { return j.submitAt.Add(j.queuedFor) }

// endAt is when the job's run ends on its own: after runFor, or at its
// requested wall time if that comes first.
func (j *simJob) endAt() time.Time {
	run := j.runFor
	if w, ok := parseHMS(j.wall); ok && w < run {
		run = w
	}
	return j.startAt().Add(run)
}

// timesOut reports whether the job's run exceeds its wall time.
func (j *simJob) timesOut() bool {
	w, ok := parseHMS(j.wall)
	return ok && j.runFor > w
}

// ended reports whether the job has ended (in any way).
func (j *simJob) ended() bool { return !j.endedAt.IsZero() }

// ranFor is how long the job ran: up to its end, or to now.
func (j *simJob) ranFor(now time.Time) time.Duration {
	switch {
	case j.ended() && j.endedAt.After(j.startAt()):
		return j.endedAt.Sub(j.startAt())
	case j.ended(), now.Before(j.startAt()):
		return 0
	}
	return now.Sub(j.startAt())
}

var wallTimeRE = regexp.MustCompile(`^(\d{2,}):([0-5]\d):([0-5]\d)$`)

// parseHMS reads HH:MM:SS.
func parseHMS(s string) (time.Duration, bool) {
	m := wallTimeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	se, _ := strconv.Atoi(m[3])
	return time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(se)*time.Second, true
}

func formatHMS(d time.Duration) string {
	s := int64(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}

// submitBody is the submit call's body.
type submitBody struct {
	StrJobManagerID string         `json:"strJobManagerID"`
	MapAppJobInfo   map[string]any `json:"mapAppJobInfo"`
}

// submit validates a job and queues it. Only the template BASIC/BASE is
// known.
func (c *Compute) submit(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok {
		return
	}
	invalid := func(format string, args ...any) {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, fmt.Sprintf(format, args...))
	}
	if t, n := r.PathValue("type"), r.PathValue("name"); t != "BASIC" || n != "BASE" {
		invalid("unknown app template %s/%s", t, n)
		return
	}
	var body submitBody
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	if err := dec.Decode(&body); err != nil {
		invalid("body is not a JSON object with strJobManagerID and mapAppJobInfo")
		return
	}
	if body.StrJobManagerID != strconv.FormatInt(cl.schedID, 10) {
		invalid("strJobManagerID %q is not the scheduler of cluster %s", body.StrJobManagerID, cl.name)
		return
	}
	info := body.MapAppJobInfo
	str := func(key string) (string, error) {
		v, ok := info[key]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("%s must be a string", key)
		}
		return s, nil
	}
	get := map[string]string{}
	for _, k := range []string{"GAP_JOB_NAME", "GAP_QUEUE", "GAP_NNODE", "GAP_PPN", "GAP_WALL_TIME", "GAP_SCHED_FILE",
		"GAP_WORK_DIR", "GAP_STD_OUT_FILE", "GAP_STD_ERR_FILE", "GAP_SUBMIT_TYPE", "GAP_CLUSTER_ID",
		"GAP_NODE_TYPE", "GAP_MULTI_SUB", "GAP_JOB_MEM", "GAP_NGPU", "GAP_NDCU"} {
		s, err := str(k)
		if err != nil {
			invalid("%v", err)
			return
		}
		get[k] = s
	}
	for _, k := range []string{"GAP_JOB_NAME", "GAP_QUEUE", "GAP_NNODE", "GAP_PPN", "GAP_WALL_TIME", "GAP_SCHED_FILE"} {
		if get[k] == "" {
			invalid("%s is required", k)
			return
		}
	}
	if v, ok := info["GAP_GUI"]; ok && v != nil {
		if _, isNum := v.(float64); !isNum {
			invalid("GAP_GUI must be an integer")
			return
		}
	}
	if v, ok := info["advance"]; ok && v != nil {
		if _, isBool := v.(bool); !isBool {
			invalid("advance must be a boolean")
			return
		}
	}
	if id := get["GAP_CLUSTER_ID"]; id != "" && id != cl.id {
		invalid("GAP_CLUSTER_ID %q is not this cluster (%s)", id, cl.id)
		return
	}
	var queue *simQueue
	for i := range cl.queues {
		if cl.queues[i].name == get["GAP_QUEUE"] {
			queue = &cl.queues[i]
		}
	}
	if queue == nil {
		invalid("GAP_QUEUE %q is not a queue of cluster %s", get["GAP_QUEUE"], cl.name)
		return
	}
	nodes, err := strconv.Atoi(get["GAP_NNODE"])
	if err != nil || nodes < 1 || nodes > queue.maxNodes {
		invalid("GAP_NNODE must be an integer in [1, %d] for queue %s", queue.maxNodes, queue.name)
		return
	}
	ppn, err := strconv.Atoi(get["GAP_PPN"])
	if err != nil || ppn < 1 || ppn > queue.maxPPN {
		invalid("GAP_PPN must be an integer in [1, %d] for queue %s", queue.maxPPN, queue.name)
		return
	}
	wall, ok := parseHMS(get["GAP_WALL_TIME"])
	if !ok {
		invalid("GAP_WALL_TIME must have the shape HH:MM:SS")
		return
	}
	if wall <= 0 || wall > queue.maxWall {
		invalid("GAP_WALL_TIME must be in (00:00:00, %s] for queue %s", formatHMS(queue.maxWall), queue.name)
		return
	}
	gpus, _ := strconv.Atoi(cmpStr(get["GAP_NGPU"], "0"))
	dcus, _ := strconv.Atoi(cmpStr(get["GAP_NDCU"], "0"))
	if refusal := queue.refuseCards(gpus, dcus); refusal != "" {
		invalid("%s", refusal)
		return
	}
	schedPath := get["GAP_SCHED_FILE"]
	hp, err := c.hostPath(schedPath)
	if err != nil {
		invalid("GAP_SCHED_FILE must be an absolute path")
		return
	}
	f, err := os.Open(hp)
	if err != nil {
		invalid("GAP_SCHED_FILE %s does not exist", schedPath)
		return
	}
	script, err := io.ReadAll(io.LimitReader(f, maxScriptBytes+1))
	_ = f.Close()
	if err != nil || len(script) > maxScriptBytes {
		invalid("GAP_SCHED_FILE %s is not a readable script of at most 1 MiB", schedPath)
		return
	}
	workDir := get["GAP_WORK_DIR"]
	if workDir == "" {
		workDir = path.Dir(path.Clean(schedPath))
	}
	if !strings.HasPrefix(workDir, "/") {
		invalid("GAP_WORK_DIR must be an absolute path")
		return
	}
	job := &simJob{
		gpus: max(gpus, 0), dcus: max(dcus, 0),
		name: get["GAP_JOB_NAME"], queue: queue.name, cluster: cl,
		workDir: path.Clean(workDir), script: schedPath, nodes: nodes, ppn: ppn,
		wall: get["GAP_WALL_TIME"], submitType: get["GAP_SUBMIT_TYPE"],
		lines:     strings.Split(strings.ReplaceAll(string(script), "\r\n", "\n"), "\n"),
		queuedFor: c.cfg.QueuedFor, runFor: c.cfg.RunFor,
		phase: simQueued,
	}
	if err := job.readHeaders(); err != nil {
		invalid("GAP_SCHED_FILE %s: %v", schedPath, err)
		return
	}
	c.mu.Lock()
	c.nextJob++
	job.id = strconv.FormatInt(c.nextJob, 10)
	job.submitAt = c.cfg.Now()
	job.stdout = job.resolve(cmpStr(get["GAP_STD_OUT_FILE"], job.name+".o"+job.id))
	job.stderr = job.resolve(cmpStr(get["GAP_STD_ERR_FILE"], job.name+".e"+job.id))
	c.jobs[job.id] = job
	c.counters.start(job.submitAt, job.endAt())
	c.submits[job.name]++
	c.save()
	c.mu.Unlock()
	c.counters.Add("submits:"+job.name, 1)
	c.counters.Add("jobs:"+simQueued, 1)
	writeOK(w, job.id)
}

// refuseCards says why q's scheduler refuses a job of gpus GPUs and dcus
// DCUs per node, "" when it takes it. A queue's minimum of DCUs is
// refused as Slurm refuses it, by its QOS reason QOSMinGRES
// (platform-evidence.md section 7).
func (q *simQueue) refuseCards(gpus, dcus int) string {
	switch {
	case q.maxGPUPN > 0 && gpus > q.maxGPUPN:
		return fmt.Sprintf("GAP_NGPU %d is more than the %d GPUs per node of queue %s", gpus, q.maxGPUPN, q.name)
	case q.maxDCUPN > 0 && dcus > q.maxDCUPN:
		return fmt.Sprintf("GAP_NDCU %d is more than the %d DCUs per node of queue %s", dcus, q.maxDCUPN, q.name)
	case dcus < q.minDCUs:
		return "sbatch: error: QOSMinGRES\nsbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size and/or time limits)"
	}
	return ""
}

func cmpStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// resolve makes p absolute against the job's work directory.
func (j *simJob) resolve(p string) string {
	if strings.HasPrefix(p, "/") {
		return path.Clean(p)
	}
	return path.Join(j.workDir, p)
}

// readHeaders applies the submit-time directives.
func (j *simJob) readHeaders() error {
	for _, line := range j.lines {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "#SIM" {
			continue
		}
		switch f[1] {
		case "queuedfor", "runfor":
			if len(f) != 3 {
				return fmt.Errorf("#SIM %s takes one duration", f[1])
			}
			d, err := time.ParseDuration(f[2])
			if err != nil || d < 0 {
				return fmt.Errorf("#SIM %s: %q is not a duration", f[1], f[2])
			}
			if f[1] == "queuedfor" {
				j.queuedFor = d
			} else {
				j.runFor = d
			}
		case "vanish":
			j.vanish = true
		case "nodefail":
			j.nodeFail = true
		case "lagfail":
			j.lagFail = true
		case "detailerror":
			n := 1
			if len(f) == 3 {
				v, err := strconv.Atoi(f[2])
				if err != nil || v < 1 {
					return fmt.Errorf("#SIM detailerror: %q is not a positive count", f[2])
				}
				n = v
			}
			j.detailErrors = n
		}
	}
	return nil
}

// settle moves every job to the phase its times call for at now, running
// the scripts of the jobs whose run ended.
func (c *Compute) settle(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	for id, j := range c.jobs {
		if j.phase == simQueued && !now.Before(j.startAt()) {
			j.phase = simRunning
			changed = true
			c.counters.Add("jobs:"+simRunning, 1)
		}
		if j.phase != simRunning || now.Before(j.endAt()) {
			continue
		}
		changed = true
		if j.vanish {
			delete(c.jobs, id)
			c.counters.Add("jobs:"+simVanished, 1)
			continue
		}
		j.exitCode = c.run(j)
		j.endedAt = j.endAt()
		j.phase = simSucceeded
		switch {
		case j.timesOut():
			j.cause, j.exitCode = causeTimeout, timeoutExit
		case j.nodeFail:
			j.cause, j.exitCode = causeNodeFail, max(j.exitCode, 1)
		case j.lagFail:
			j.cause, j.exitCode = causeLagFail, max(j.exitCode, 1)
		}
		if j.exitCode != 0 {
			j.phase = simFailed
		}
		c.counters.Add("jobs:"+j.phase, 1)
	}
	if changed {
		c.save()
	}
}

// inRealtime reports whether the realtime detail still shows j at now:
// always in Letter mode; on the platform until HistoryDelay after its end.
func (c *Compute) inRealtime(j *simJob, now time.Time) bool {
	return c.cfg.Letter || !j.ended() || now.Before(j.endedAt.Add(c.cfg.HistoryDelay))
}

// inList reports whether the realtime job list still shows j at now: on
// the platform until ListKeeps after its end.
func (c *Compute) inList(j *simJob, now time.Time) bool {
	return c.cfg.Letter || !j.ended() || now.Before(j.endedAt.Add(c.cfg.ListKeeps))
}

var sizeRE = regexp.MustCompile(`^(\d+)([KMG]?)$`)

// parseSize reads <n>[K|M|G].
func parseSize(s string) (int64, bool) {
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	switch m[2] {
	case "K":
		n <<= 10
	case "M":
		n <<= 20
	case "G":
		n <<= 30
	}
	return n, n >= 0 && n <= maxOutputBytes
}

// run executes j's script body and writes its stdout and stderr; it
// returns the exit code.
func (c *Compute) run(j *simJob) int {
	var stdout, stderr strings.Builder
	fmt.Fprintf(&stdout, "apisim: job %s (%s) on %s, queue %s, %d node(s) x %d\n", j.id, j.name, j.cluster.name, j.queue, j.nodes, j.ppn)
	code, explicit := 0, false
	fail := func(format string, args ...any) {
		fmt.Fprintf(&stderr, format+"\n", args...)
		code, explicit = 1, true
	}
lines:
	for _, line := range j.lines {
		line = strings.TrimSpace(line)
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "echo":
			stdout.WriteString(strings.TrimSpace(strings.TrimPrefix(line, "echo")) + "\n")
		case f[0] == "exit" || (f[0] == "#SIM" && len(f) > 1 && f[1] == "exit"):
			args := f[1:]
			if f[0] == "#SIM" {
				args = f[2:]
			}
			n := 0
			if len(args) > 0 {
				v, err := strconv.Atoi(args[0])
				if err != nil {
					v = 2
					fmt.Fprintf(&stderr, "exit: %s: numeric argument required\n", args[0])
				}
				n = v
			}
			code, explicit = n, true
			break lines
		case f[0] == "cp" && len(f) == 3:
			if err := c.copyFile(j.resolve(f[1]), j.resolve(f[2])); err != nil {
				fail("cp: %v", err)
				break lines
			}
		case f[0] == "#SIM" && len(f) > 1 && f[1] == "stderr":
			stderr.WriteString(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(line, "#SIM")), "stderr")) + "\n")
		case f[0] == "#SIM" && len(f) > 1 && f[1] == "output":
			if len(f) != 4 {
				fail("#SIM output takes a path and a size")
				break lines
			}
			size, ok := parseSize(f[3])
			if !ok {
				fail("#SIM output: bad size %q", f[3])
				break lines
			}
			if err := c.writeFile(j.resolve(f[2]), ComputeOutputBytes(j.resolve(f[2]), size)); err != nil {
				fail("#SIM output: %v", err)
				break lines
			}
		}
	}
	if !explicit && c.cfg.FailureRate > 0 && rand.Float64() < c.cfg.FailureRate {
		code = 1
		stderr.WriteString("apisim: simulated failure\n")
	}
	_ = c.writeFile(j.stdout, strings.NewReader(stdout.String()))
	_ = c.writeFile(j.stderr, strings.NewReader(stderr.String()))
	return code
}

// writeFile stores r at the cluster path p, creating directories.
func (c *Compute) writeFile(p string, r io.Reader) error {
	hp, err := c.hostPath(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(hp), 0o755); err != nil {
		return fmt.Errorf("cannot create directory of %s", p)
	}
	f, err := os.Create(hp)
	if err != nil {
		return fmt.Errorf("cannot create %s", p)
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return fmt.Errorf("cannot write %s", p)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s", p)
	}
	return nil
}

// copyFile copies the cluster file src to dst (into dst when it is a
// directory).
func (c *Compute) copyFile(src, dst string) error {
	hs, err := c.hostPath(src)
	if err != nil {
		return err
	}
	in, err := os.Open(hs)
	if err != nil {
		return fmt.Errorf("cannot stat '%s': No such file or directory", src)
	}
	defer func() { _ = in.Close() }()
	if st, err := in.Stat(); err != nil || !st.Mode().IsRegular() {
		return fmt.Errorf("'%s' is not a regular file", src)
	}
	if hd, err := c.hostPath(dst); err == nil {
		if st, err := os.Stat(hd); err == nil && st.IsDir() {
			dst = path.Join(dst, path.Base(src))
		}
	}
	return c.writeFile(dst, in)
}

// job answers the details of a job of the token's cluster. On the
// platform a job that ended HistoryDelay ago is no longer here: the answer
// is a success without a record (data null), and the job is in the
// history.
func (c *Compute) job(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok {
		return
	}
	now := c.cfg.Now()
	c.settle(now)
	id := r.PathValue("id")
	c.mu.Lock()
	j, found := c.jobs[id]
	found = found && j.cluster == cl
	var view map[string]any
	internal, gone := false, false
	switch {
	case found && j.ended() && j.detailErrors > 0:
		j.detailErrors--
		internal = true
		c.save()
	case found && !c.inRealtime(j, now):
		gone = true
	case found:
		view = c.jobView(j, now)
	}
	c.mu.Unlock()
	switch {
	case internal:
		writeEnvelopeError(w, http.StatusOK, ComputeCodePlatformInternal, "internal error")
	case gone:
		writeOK(w, nil)
	case view == nil:
		writeEnvelopeError(w, http.StatusOK, ComputeCodeNotFound, "job "+id+" not found")
	default:
		writeOK(w, view)
	}
}

// simTime writes t as the platform does; "" for the zero time.
func simTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.In(simZone).Format(jobTimeLayout)
}

// jobView renders a job detail (spec 2.6). The caller holds c.mu.
func (c *Compute) jobView(j *simJob, now time.Time) map[string]any {
	status, state := "statQ", "QUEUED"
	var (
		start, runTime    string
		end, exit, cpu    any
		procUsed, nodeStr = 0, ""
		reason            = "None"
	)
	if j.phase != simQueued && (j.phase != simCancelled || j.ranFor(now) > 0) {
		ran := j.ranFor(now)
		start, runTime = simTime(j.startAt()), formatHMS(ran)
		procUsed, nodeStr = j.nodes*j.ppn, simNode
		cpu = formatHMS(ran * time.Duration(j.nodes*j.ppn))
	}
	switch j.phase {
	case simRunning:
		status, state = "statR", "RUNNING"
	case simSucceeded, simFailed, simCancelled:
		status, state = "statC", "COMPLETED"
		switch j.cause {
		case causeTimeout:
			status, state = "statT", "TIMEOUT"
		case causeNodeFail:
			status, state = "statN", "NODE_FAIL"
		case causeLagFail:
			state, reason = "FAILED", "NonZeroExitCode"
		case causeCancelled:
			status, state = "statDE", "CANCELLED"
		}
		end, exit = simTime(j.endedAt), strconv.Itoa(j.exitCode)
		if j.cause == causeLagFail {
			// The platform's status lags the scheduler: the detail shows
			// a completion with exit code 0, only JobState and reason
			// tell the failure.
			exit = "0"
		}
	}
	return map[string]any{
		"jobId": j.id, "jobName": j.name, "jobStatus": status, "queue": j.queue,
		"user": c.clusterUser(), "jobSubmitTime": simTime(j.submitAt),
		"jobStartTime": start, "jobEndTime": end, "exitCode": exit,
		"nodeUsed": nodeStr, "procNumUsed": procUsed, "gpuNumUsed": 0, "dcuNumUsed": nil,
		"memUsed": "0", "cpuTimeUsed": cpu, "jobRunTime": runTime, "walltimeReq": j.wall,
		"nodeNumReq": j.nodes, "procNumReq": j.nodes * j.ppn, "gpuNumReq": j.nodes * j.gpus, "dcuNumReq": nil,
		"workDir": j.workDir, "errorPath": j.stderr, "outputPath": j.stdout,
		"priority": "0", "account": nil, "appType": "BASIC", "scale": nil, "jobVncSessionInfo": nil,
		"jobInitAttr": map[string]string{
			"JobState": state, "Queue": j.queue, "Job_Name": j.name,
			"Resource_List.nodect": strconv.Itoa(j.nodes), "Resource_List.walltime": j.wall,
		},
		"jobmanagerId":   strconv.FormatInt(j.cluster.schedID, 10),
		"jobmanagerName": j.cluster.schedName, "jobmanagerType": j.cluster.schedType,
		"restarts": "0", "aveVMSize": "0", "aveRSS": "0", "reason": reason,
	}
}
