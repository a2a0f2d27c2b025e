package explore

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/jobclient"
)

// jobID is the id of a schedule's i-th job.
func jobID(i int) string { return fmt.Sprintf("exp-job-%d", i) }

// prompt names a job's family in what it pays for, so the simulator's
// records say which job created each task.
func prompt(family string) string { return "explore " + family + " ." }

// roleIn is the job a request or subject is about: the job whose id it
// names (the longest such id: a retry's id extends its original's), else
// the family of the upstream object it names; "-" when none.
func (r *run) roleIn(text string) string {
	r.mu.Lock()
	jobs := append([]job(nil), r.jobs...)
	r.mu.Unlock()
	sort.Slice(jobs, func(i, j int) bool { return len(jobs[i].id) > len(jobs[j].id) })
	for _, j := range jobs {
		if strings.Contains(text, j.id) {
			return roleName(j.id)
		}
	}
	for _, rec := range append(r.media.Records(), r.compute.Records()...) {
		if strings.Contains(text, rec.ID) {
			return roleName(familyOf(rec))
		}
	}
	return "-"
}

// roleName is a job's name in decision points: the same in every
// schedule, so points can be counted across schedules.
func roleName(id string) string { return strings.TrimPrefix(id, "exp-") }

// familyOf is the job family an upstream object was made for: the job
// its prompt names, else the one its work directory is for, else the
// instance's name (sluice-<job id>).
func familyOf(rec apisim.Record) string {
	if f := strings.Fields(rec.Owner); len(f) >= 2 && f[0] == "explore" {
		return f[1]
	}
	if rec.Where != "" {
		return path.Base(rec.Where)
	}
	return strings.TrimPrefix(rec.Owner, "sluice-")
}

// sharedName is the compute job name the schedule's compute jobs share.
const sharedName = "explore-shared"

// videoSpec is a video job whose prompt names it.
func videoSpec(id string) map[string]any {
	return map[string]any{
		"id": id, "kind": "video",
		"video": map[string]any{
			"model": "video-model", "input": map[string]any{"prompt": prompt(id)},
			"parameters": map[string]any{"resolution": "768P", "duration": 5, "ratio": "16:9"},
		},
	}
}

// computeSpec is a compute job named sharedName whose work directory
// names it; its script is the schedule's script object (putScript).
func (r *run) computeSpec(id string) map[string]any {
	dir := "/public/home/alice/" + id
	return map[string]any{
		"id": id, "kind": "compute",
		"compute": map[string]any{
			"template": map[string]string{"type": "BASIC", "name": "BASE"},
			"job": map[string]any{
				"name": sharedName, "queue": "normal", "nodes": 1, "ppn": 1, "wall_time": "00:10:00",
				"work_dir": dir, "script": dir + "/run.sh",
			},
			"inputs":  []map[string]any{{"from": r.scriptURL, "to": dir, "cover": true}},
			"outputs": []string{dir + "/result.dat"},
		},
	}
}

// containerSpec is a short container job with one output.
func containerSpec(id string) map[string]any {
	return map[string]any{
		"id": id, "kind": "container",
		"container": map[string]any{
			"instance": map[string]any{
				"image": "registry.test:5000/gpu/admin/base/torch:2.1", "version": "torch:2.1",
				"accelerator": "gpu", "resource_group": "TeslaM40", "cpus": 1, "gpus": 1, "ram_mb": 4096,
				"timeout": "00:10:00",
			},
			"script":  "echo exploring\n#SIM output model.bin 1K\nexit 0\n",
			"outputs": []string{"/public/home/alice/sluice/" + id + "/model.bin"},
		},
	}
}

// pipelineSteps are the schedule's pipeline's steps: a needs nothing, b
// needs a.
var pipelineSteps = []string{"a", "b"}

// pipelineSpec is a pipeline of two video steps, the second needing the
// first; each step's prompt names the step's job.
func pipelineSpec(id string) map[string]any {
	var steps []any
	for i, name := range pipelineSteps {
		spec := videoSpec(id + "--" + name)
		delete(spec, "id")
		st := map[string]any{"name": name, "spec": spec}
		if i > 0 {
			st["needs"] = []string{pipelineSteps[i-1]}
		}
		steps = append(steps, st)
	}
	return map[string]any{"id": id, "kind": "pipeline", "pipeline": map[string]any{"steps": steps}}
}

// addPipeline registers pipeline id, a retry of pipeline family (its own
// id for the first run), and its steps, each of the family of the
// original's step: a retried pipeline's step runs the same spec.
func (r *run) addPipeline(id, family string) {
	r.addJob(job{id: id, family: family})
	for _, name := range pipelineSteps {
		r.addJob(job{id: id + "--" + name, family: family + "--" + name, step: true})
	}
}

// putScript stores the compute jobs' script in S3 under the schedule's
// prefix.
func (r *run) putScript(ctx context.Context) error {
	key := r.cfg.S3Prefix + "/inputs/run.sh"
	_, err := r.s3.Client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(r.s3.Bucket), Key: aws.String(key),
		Body: strings.NewReader("#!/bin/sh\necho exploring\n#SIM output result.dat 1K\n"),
	})
	r.scriptURL = "s3://" + r.s3.Bucket + "/" + key
	return err
}

// publish sends a job's spec; with dedup false it carries no message id,
// so a second publish makes JetStream deliver the same job id twice.
func (r *run) publish(ctx context.Context, kind string, spec map[string]any, dedup bool) error {
	id, _ := spec["id"].(string)
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	m := nats.NewMsg(contract.JobSubject(kind))
	m.Data = data
	if dedup {
		m.Header.Set(contract.HeaderMsgID, id)
	}
	_, err = r.nats.JS.PublishMsg(ctx, m)
	return err
}

// play runs the schedule's producers: it publishes the jobs, a duplicate,
// a cancel and a retry as the seed says, and waits for every job's
// terminal event.
func (r *run) play(ctx context.Context) ([]events.Event, error) {
	nc := r.nats.Conn
	if err := contract.EnsureJobsStream(ctx, r.nats.JS, contract.Options{}); err != nil {
		return nil, err
	}
	if err := r.putScript(ctx); err != nil {
		return nil, fmt.Errorf("compute script: %w", err)
	}
	r.startWorker()
	for i := 1; i <= videoJobs+computeJobs+containerJobs; i++ {
		r.addJob(job{id: jobID(i), family: jobID(i)})
		kind, spec := "video", videoSpec(jobID(i))
		switch {
		case i > videoJobs+computeJobs:
			kind, spec = "container", containerSpec(jobID(i))
		case i > videoJobs:
			kind, spec = "compute", r.computeSpec(jobID(i))
		}
		if err := r.publish(ctx, kind, spec, true); err != nil {
			return nil, fmt.Errorf("publish: %w", err)
		}
	}
	r.addPipeline(jobID(pipelineJob), jobID(pipelineJob))
	if err := r.publish(ctx, "pipeline", pipelineSpec(jobID(pipelineJob)), true); err != nil {
		return nil, fmt.Errorf("publish the pipeline: %w", err)
	}
	if hash(r.seed, "duplicate")%2 == 0 {
		if err := r.publish(ctx, "video", videoSpec(jobID(1)), false); err != nil {
			return nil, fmt.Errorf("publish again: %w", err)
		}
	}
	if hash(r.seed, "duplicate compute")%2 == 0 {
		if err := r.publish(ctx, "compute", r.computeSpec(jobID(videoJobs+1)), false); err != nil {
			return nil, fmt.Errorf("publish again: %w", err)
		}
	}
	jc, err := jobclient.New(nc, time.Now)
	if err != nil {
		return nil, err
	}
	if hash(r.seed, "cancel")%2 == 0 {
		// The answer does not matter: the job's events say what happened.
		_, _ = jc.Cancel(ctx, jobID(2), jobclient.CancelOptions{})
	}
	if h := hash(r.seed, "cancel pipeline"); h%3 == 0 {
		// Races the steps' starts: sent at once or up to a task's time
		// later, as the seed says.
		time.Sleep(time.Duration(h/3%4) * taskTime / 3)
		_, _ = jc.Cancel(ctx, jobID(pipelineJob), jobclient.CancelOptions{})
	}
	evs, err := r.awaitTerminal(ctx)
	if err != nil || !r.allEnded(evs) {
		return evs, err
	}
	retried := false
	if hash(r.seed, "retry")%2 == 0 {
		if res, err := jc.Retry(ctx, jobID(3), jobclient.RetryOptions{Force: true}); err == nil {
			// (A retry refused, e.g. still held, is no violation.)
			r.addJob(job{id: res.RetryID, family: jobID(3)})
			retried = true
		}
	}
	if hash(r.seed, "retry pipeline")%2 == 0 {
		if res, err := jc.Retry(ctx, jobID(pipelineJob), jobclient.RetryOptions{Force: true}); err == nil {
			r.addPipeline(res.RetryID, jobID(pipelineJob))
			retried = true
		}
	}
	if !retried {
		return evs, nil
	}
	return r.awaitTerminal(ctx)
}

func (r *run) addJob(j job) {
	r.mu.Lock()
	r.jobs = append(r.jobs, j)
	r.mu.Unlock()
}

// awaitTerminal reads the events until every job has a terminal one, or
// nothing moved for quietBound, or settleBound passed (the checks then
// report the jobs without one).
func (r *run) awaitTerminal(ctx context.Context) ([]events.Event, error) {
	deadline := time.Now().Add(settleBound)
	for {
		evs, err := r.events(ctx)
		if err != nil {
			return nil, err
		}
		if r.allEnded(evs) {
			return evs, nil
		}
		if r.sched.quietFor() > quietBound || time.Now().After(deadline) {
			r.t.Logf("seed %d: jobs not ended, the world before the workers stop:\n%s", r.seed, r.snapshot(ctx, evs))
			return evs, nil
		}
		select {
		case <-ctx.Done():
			return evs, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// allEnded: every job has its terminal event, and so has every step a
// pipeline's terminal event shows as run. A pipeline ends on its steps'
// records, so a step's own event may still be on its way (a lost reply
// to its terminal write, then a redelivery) when its pipeline's is out.
func (r *run) allEnded(evs []events.Event) bool {
	ended := map[string]bool{}
	var ran []string
	for _, e := range evs {
		if !terminal(e.Data.Status) {
			continue
		}
		ended[e.Data.JobID] = true
		for _, s := range e.Data.Steps {
			if s.Status != "skipped" && s.Status != "waiting" && !s.Reused {
				ran = append(ran, s.JobID)
			}
		}
	}
	for _, id := range ran {
		if !ended[id] {
			return false
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		if !ended[j.id] && !j.step { // a step not run has no event
			return false
		}
	}
	return true
}

func terminal(status string) bool {
	return status == "succeeded" || status == "failed" || status == "cancelled"
}

// events is every event published so far, in order.
func (r *run) events(ctx context.Context) ([]events.Event, error) {
	s, err := r.nats.JS.Stream(ctx, contract.EventsStream)
	if err != nil {
		return nil, nil // no event yet: the stream is made by the first worker
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []events.Event
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		var ev events.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
		out = append(out, ev)
	}
	return out, nil
}
