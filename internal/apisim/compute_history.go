package apisim

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The platform's job operations that compute-api.md does not list
// (spec/platform-evidence.md sections 1 and 2): the job history, the list
// of current jobs and cancel. Served only in platform mode (not Letter).

// Endpoint names of the platform-only job operations.
const (
	EndpointComputeJobs        = "compute.jobs"
	EndpointComputeCancel      = "compute.cancel"
	EndpointComputeHistory     = "compute.history"
	EndpointComputeHistoryList = "compute.history_list"
)

// registerPlatformJobs adds the platform-only job routes to mux.
func (c *Compute) registerPlatformJobs(mux *http.ServeMux) {
	c.handle(mux, "GET /hpc/openapi/v2/jobs", EndpointComputeJobs, c.jobList)
	c.handle(mux, "DELETE /hpc/openapi/v2/jobs", EndpointComputeCancel, c.cancel)
	c.handle(mux, "GET /hpc/openapi/v2/historyjobs", EndpointComputeHistoryList, c.historyList)
	c.handle(mux, "GET /hpc/openapi/v2/historyjobs/{manager}/{id}", EndpointComputeHistory, c.historyOne)
}

// missingJob answers as the platform does for a job it does not have.
func missingJob(w http.ResponseWriter, id string) {
	writeEnvelopeError(w, http.StatusOK, ComputeCodeNotFound, "作业 "+id+" 不存在 (job does not exist)")
}

// page reads start and limit (defaults 0 and 25, limit at most 1000).
func page(r *http.Request) (start, limit int, ok bool) {
	q := r.URL.Query()
	start, limit = 0, 25
	if v := q.Get("start"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return 0, 0, false
		}
		start = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return 0, 0, false
		}
		limit = n
	}
	return start, limit, true
}

// pageOf answers one page of items with their total.
func pageOf(w http.ResponseWriter, items []map[string]any, start, limit int) {
	total := len(items)
	items = items[min(start, total):min(start+limit, total)]
	writeOK(w, map[string]any{"total": total, "list": items})
}

// schedulerOf checks that the query names cl's scheduler under one of
// keys; on failure it has answered.
func schedulerOf(w http.ResponseWriter, r *http.Request, cl *simCluster, keys ...string) bool {
	want := strconv.FormatInt(cl.schedID, 10)
	for _, k := range keys {
		if v := r.URL.Query().Get(k); v != "" {
			if v != want {
				writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, k+" "+strconv.Quote(v)+" is not a scheduler of this cluster")
				return false
			}
			return true
		}
	}
	writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, strings.Join(keys, " or ")+" is required")
	return false
}

// sortedJobs returns the jobs of cl that keep accepts, by id. The caller
// holds c.mu.
func (c *Compute) sortedJobs(cl *simCluster, keep func(*simJob) bool) []*simJob {
	type numbered struct {
		n int64
		j *simJob
	}
	var all []numbered
	for _, j := range c.jobs {
		if j.cluster == cl && keep(j) {
			n, _ := strconv.ParseInt(j.id, 10, 64)
			all = append(all, numbered{n, j})
		}
	}
	slices.SortFunc(all, func(a, b numbered) int { return cmp.Compare(a.n, b.n) })
	out := make([]*simJob, len(all))
	for i, x := range all {
		out[i] = x.j
	}
	return out
}

// jobList answers the realtime list of the cluster's current jobs and
// those that ended less than ListKeeps ago (GET .../jobs
// ?strClusterIDList=<scheduler id>&start=&limit=[&strJobStat=]), by id,
// at most ListPageLimit a page; strJobStat keeps one jobStatus.
func (c *Compute) jobList(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok || !schedulerOf(w, r, cl, "strClusterIDList") {
		return
	}
	start, limit, ok := page(r)
	if !ok {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "start and limit must be integers, limit in [1, 1000]")
		return
	}
	limit = min(limit, c.cfg.ListPageLimit)
	stat := r.URL.Query().Get("strJobStat")
	now := c.cfg.Now()
	c.settle(now)
	c.mu.Lock()
	jobs := c.sortedJobs(cl, func(j *simJob) bool { return c.inList(j, now) })
	var listed []*simJob
	for _, j := range jobs {
		// Only the page's jobs are rendered: a list of 10,000 jobs is
		// read a page at a time.
		if stat == "" || c.jobView(j, now)["jobStatus"] == stat {
			listed = append(listed, j)
		}
	}
	total := len(listed)
	items := make([]map[string]any, 0, limit)
	for _, j := range listed[min(start, total):min(start+limit, total)] {
		items = append(items, c.jobView(j, now))
	}
	c.mu.Unlock()
	writeOK(w, map[string]any{"total": total, "list": items})
}

// cancel deletes jobs (DELETE .../jobs, form jobMethod=5 and
// strJobInfoMap=<scheduler id>,<user>:<job id>:[;...]). A queued or
// running job ends statDE at once; a job that has ended already, or is
// unknown, fails the call.
func (c *Compute) cancel(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok {
		return
	}
	// net/http parses no DELETE body into PostForm: read it here.
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	form, perr := url.ParseQuery(string(body))
	if err != nil || perr != nil || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "the body must be a form (application/x-www-form-urlencoded)")
		return
	}
	if m := form.Get("jobMethod"); m != "5" {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "jobMethod "+strconv.Quote(m)+" is not 5")
		return
	}
	type target struct{ sched, user, id string }
	var targets []target
	for entry := range strings.SplitSeq(form.Get("strJobInfoMap"), ";") {
		if entry == "" {
			continue
		}
		head, rest, ok1 := strings.Cut(entry, ",")
		user, id, ok2 := strings.Cut(rest, ":")
		id, tail, ok3 := strings.Cut(id, ":")
		if !ok1 || !ok2 || !ok3 || tail != "" || id == "" {
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "strJobInfoMap entry "+strconv.Quote(entry)+" is not <scheduler id>,<user>:<job id>:")
			return
		}
		targets = append(targets, target{head, user, id})
	}
	if len(targets) == 0 {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "strJobInfoMap is required")
		return
	}
	now := c.cfg.Now()
	c.settle(now)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range targets {
		j, found := c.jobs[t.id]
		switch {
		case t.sched != strconv.FormatInt(cl.schedID, 10):
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "scheduler "+strconv.Quote(t.sched)+" is not a scheduler of this cluster")
			return
		case t.user != c.clusterUser():
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "user "+strconv.Quote(t.user)+" is not the cluster user")
			return
		case !found || j.cluster != cl:
			missingJob(w, t.id)
			return
		case j.ended():
			writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "job "+t.id+" has already ended")
			return
		}
	}
	for _, t := range targets {
		j := c.jobs[t.id]
		j.phase, j.cause, j.exitCode, j.endedAt = simCancelled, causeCancelled, 271, now
		note := fmt.Sprintf("apisim: job %s (%s) cancelled\n", j.id, j.name)
		_ = c.writeFile(j.stdout, strings.NewReader(note))
		_ = c.writeFile(j.stderr, strings.NewReader(note))
		c.counters.Add("jobs:"+simCancelled, 1)
	}
	c.save()
	writeOK(w, nil)
}

// historyOne answers one ended job's history record
// (GET .../historyjobs/{jobmanagerId}/{jobId}[?acctTime=]).
func (c *Compute) historyOne(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok {
		return
	}
	now := c.cfg.Now()
	c.settle(now)
	id := r.PathValue("id")
	c.mu.Lock()
	j, found := c.jobs[id]
	var rec map[string]any
	if found && j.cluster == cl && j.ended() && r.PathValue("manager") == strconv.FormatInt(cl.schedID, 10) {
		rec = c.historyRecord(j)
	}
	c.mu.Unlock()
	if rec == nil {
		missingJob(w, id)
		return
	}
	writeOK(w, rec)
}

// historyList answers the ended jobs of the cluster whose end lies in
// [startTime, endTime] (GET .../historyjobs?strClusterNameList= or
// strClusterIDList=<scheduler id>&startTime=&endTime=&start=&limit=
// [&jobId=]), times in the platform's zone.
func (c *Compute) historyList(w http.ResponseWriter, r *http.Request) {
	cl, ok := c.authorize(w, r)
	if !ok || !schedulerOf(w, r, cl, "strClusterNameList", "strClusterIDList") {
		return
	}
	q := r.URL.Query()
	from, err1 := time.ParseInLocation(jobTimeLayout, q.Get("startTime"), simZone)
	to, err2 := time.ParseInLocation(jobTimeLayout, q.Get("endTime"), simZone)
	if err1 != nil || err2 != nil {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "startTime and endTime must have the shape YYYY-MM-DD HH:MM:SS")
		return
	}
	start, limit, ok := page(r)
	if !ok {
		writeEnvelopeError(w, http.StatusOK, ComputeCodeInvalid, "start and limit must be integers, limit in [1, 1000]")
		return
	}
	jobID := q.Get("jobId")
	c.settle(c.cfg.Now())
	c.mu.Lock()
	var items []map[string]any
	for _, j := range c.sortedJobs(cl, func(j *simJob) bool {
		end := j.endedAt.Truncate(time.Second)
		return j.ended() && (jobID == "" || j.id == jobID) && !end.Before(from) && !end.After(to)
	}) {
		items = append(items, c.historyRecord(j))
	}
	c.mu.Unlock()
	pageOf(w, items, start, limit)
}

// historyRecord renders an ended job's history record; accounting is
// derived from nodes, ppn, gpus, dcus and the run time. The caller holds
// c.mu.
func (c *Compute) historyRecord(j *simJob) map[string]any {
	state := "statC"
	switch {
	case j.cause == causeTimeout:
		state = "TIMEOUT"
	case j.cause == causeNodeFail:
		state = "statN"
	case j.cause == causeLagFail:
		state = "FAILED"
	case j.cause == causeCancelled:
		state = "statDE"
	case j.exitCode != 0:
		state = "COMPLETED"
	}
	ran := j.ranFor(j.endedAt)
	secs := int64(ran / time.Second)
	cores := int64(j.nodes * j.ppn)
	hours := func(units int64) string { return strconv.FormatFloat(float64(units*secs)/3600, 'f', 4, 64) }
	wall, _ := parseHMS(j.wall)
	acct := j.endedAt.Add(time.Second).UTC().Format("2006-01-02T15:04:05.000+0000")
	start := ""
	if ran > 0 {
		start = simTime(j.startAt())
	}
	return map[string]any{
		"jobId": j.id, "jobName": j.name, "userName": c.clusterUser(), "clusterUserName": c.clusterUser(),
		"clusterId": j.cluster.id, "clusterName": j.cluster.name,
		"jobmanagerId": j.cluster.schedID, "jobmanagerName": j.cluster.schedName,
		"appType": "BASE", "queue": j.queue, "jobState": state, "taskType": "HPC",
		"jobExitStatus": j.exitCode, "nodect": j.nodes, "nodeNumUsed": j.nodes, "procNumUsed": cores,
		"gpuNumUsed": int64(j.nodes * j.gpus), "dcuNumUsed": int64(j.nodes * j.dcus),
		"jobMemUsed": int64(j.nodes) * 2048, "jobVmemUsed": int64(j.nodes) * 4096,
		"walltime": int64(wall / time.Second), "jobWalltimeUsed": secs,
		"jobQueueTime": simTime(j.submitAt), "jobStartTime": start, "jobEndTime": simTime(j.endedAt),
		"acctTime": acct, "jobCpuTime": cores * secs,
		"jobProcNum": cores, "jobGpuNum": int64(j.nodes * j.gpus), "jobDcuNum": int64(j.nodes * j.dcus),
		"workdir": j.workDir, "command": j.script, "stdout": j.stdout, "stderr": j.stderr,
		"jobExecHost":    simNode,
		"cpuNuclearHour": hours(cores), "cpuNuclearSec": strconv.FormatInt(cores*secs, 10), "cpuUnitPrice": 1,
		"gpuCardHour": hours(int64(j.nodes * j.gpus)), "gpuCardSec": strconv.FormatInt(int64(j.nodes*j.gpus)*secs, 10), "gpuUnitPrice": 1,
		"dcuCardHour": hours(int64(j.nodes * j.dcus)), "dcuCardSec": strconv.FormatInt(int64(j.nodes*j.dcus)*secs, 10), "dcuUnitPrice": 1,
		"historyQueuerate": "1.0",
	}
}
