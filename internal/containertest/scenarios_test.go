package containertest

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/apisim"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv/testmedia"
)

// within bounds every wait for jobs to end: generous, because other test
// suites share the machine.
const within = 3 * time.Minute

// computeScript is a scheduler script for the compute simulator.
const computeScript = "#!/bin/sh\necho simulating\n#SIM output result.dat 300K\ncp params.nml params-copy.nml\n"

func TestEveryKindEndToEnd(t *testing.T) {
	t.Parallel()
	s := newStack(t, simOptions{})
	s.put(t, "inputs/frame.png", string(testmedia.Fixture(t, "image-384x256.png")))
	s.put(t, "inputs/boat.heic", string(testmedia.Fixture(t, "image-384x256.heic")))
	s.put(t, "inputs/rain.mp3", string(testmedia.Fixture(t, "audio-3s-cbr-no-xing.mp3")))
	s.startWorker(t, "worker-1")
	jobs := []job{
		// Two results, one of them large enough for a multipart upload.
		videoJob("text-to-video", "a paper boat [sim:count=2] [sim:size=12000000]"),
		videoJob("image-to-video", "the boat sails off", map[string]string{"type": "first_frame", "url": "s3://" + bucket + "/inputs/frame.png"}),
		videoJob("reference-to-video", "the same boat at night",
			map[string]string{"type": "reference_image", "url": "s3://" + bucket + "/inputs/boat.heic"},
			map[string]string{"type": "reference_audio", "url": "s3://" + bucket + "/inputs/rain.mp3"}),
		speechJob("speech-sync", "hello, synchronously", "sync"),
		speechJob("speech-async", "hello, as a task", "async"),
		speechJob("speech-stream", "hello, streamed", "stream"),
		s.computeJob(t, "compute-1", computeScript),
	}
	s.publish(t, jobs...)
	ended := s.awaitEnded(t, jobs, within)
	s.checkSucceeded(t, jobs, ended)

	if got := ended["text-to-video"].Data.Artifacts; len(got) != 2 || got[0].Size != 12000000 {
		t.Errorf("text-to-video artifacts = %+v, want 2 of 12000000 bytes", got)
	} else {
		taskID := ended["text-to-video"].Data.Upstream.TaskID
		for i, a := range got {
			if want := sha(apisim.ResultBytes(taskID, i, a.Size)); a.SHA256 != want {
				t.Errorf("result %d: sha256 %s, the simulator sent %s", i, a.SHA256, want)
			}
		}
	}
	names := map[string]bool{}
	for _, a := range ended["compute-1"].Data.Artifacts {
		names[a.Key[strings.LastIndex(a.Key, "/")+1:]] = true
	}
	for _, n := range []string{"stdout.txt", "stderr.txt", "result.dat", "params-copy.nml"} {
		if !names[n] {
			t.Errorf("compute-1 lacks artifact %s: %+v", n, ended["compute-1"].Data.Artifacts)
		}
	}
}

func TestNATSRestartedWhileJobsAreInFlight(t *testing.T) {
	t.Parallel()
	s := newStack(t, simOptions{taskTime: 6 * time.Second, computeTime: 6 * time.Second})
	s.startWorker(t, "worker-1")
	s.startWorker(t, "worker-2")
	var jobs []job
	for _, id := range []string{"v1", "v2", "v3", "v4"} {
		jobs = append(jobs, videoJob("nats-"+id, "through a NATS restart "+id))
	}
	for _, id := range []string{"s1", "s2"} {
		jobs = append(jobs, speechJob("nats-"+id, "through a NATS restart "+id, "async"))
	}
	jobs = append(jobs, s.computeJob(t, "nats-c1", computeScript), s.computeJob(t, "nats-c2", computeScript))
	s.publish(t, jobs...)
	// Every job submitted upstream and none ended: the restart hits them
	// all while they are polled.
	s.awaitRecords(t, jobs, within, func(r *state.Record) bool { return r.Upstream.TaskID != "" || r.Upstream.JobID != "" })
	if ended := s.terminal(t); len(ended) > 0 {
		t.Fatalf("%d jobs ended before the restart; the scenario needs longer tasks", len(ended))
	}
	s.restartNATS(t)

	ended := s.awaitEnded(t, jobs, within)
	s.checkSucceeded(t, jobs, ended)
}

func TestS3StoppedDuringUploads(t *testing.T) {
	t.Parallel()
	s := newStack(t, simOptions{taskTime: time.Second})
	// 12 MB results at 3 MB/s: each copy takes about 4 s, so the store
	// goes away in the middle of them.
	s.sim.resultRate.Store(3 << 20)
	s.startWorker(t, "worker-1")
	var jobs []job
	for _, id := range []string{"1", "2", "3"} {
		jobs = append(jobs, videoJob("s3-"+id, "through an S3 outage "+id+" [sim:size=12000000]"))
	}
	s.publish(t, jobs...)
	s.anyRecord(t, jobs, within, func(r *state.Record) bool { return r.Status == state.StatusCollecting })
	kill(t, s.s3)                // not stop: versitygw would finish the uploads it serves
	time.Sleep(10 * time.Second) // the outage the scenario is about
	start(t, s.s3)

	ended := s.awaitEnded(t, jobs, within)
	s.checkSucceeded(t, jobs, ended)
	// Every attempt at a copy downloads its source afresh: more downloads
	// than results show that the outage broke copies and they were retried.
	var downloads int64
	for name, n := range s.sim.media.Counters().Snapshot() {
		if strings.HasPrefix(name, "requests:"+apisim.EndpointResult+":") {
			downloads += n
		}
	}
	t.Logf("%d result downloads for %d results", downloads, len(jobs))
	if downloads <= int64(len(jobs)) {
		t.Errorf("%d result downloads for %d results: the outage missed every upload", downloads, len(jobs))
	}
}

func TestWorkerKilledMidJob(t *testing.T) {
	t.Parallel()
	s := newStack(t, simOptions{taskTime: 8 * time.Second, computeTime: 8 * time.Second})
	doomed := s.startWorker(t, "worker-doomed")
	var jobs []job
	for _, id := range []string{"v1", "v2", "v3"} {
		jobs = append(jobs, videoJob("kill-"+id, "through a worker crash "+id))
	}
	jobs = append(jobs, speechJob("kill-s1", "through a worker crash s1", "async"), s.computeJob(t, "kill-c1", computeScript))
	s.publish(t, jobs...)
	s.awaitRecords(t, jobs, within, func(r *state.Record) bool { return r.Upstream.TaskID != "" || r.Upstream.JobID != "" })
	s.kill(t, doomed)
	for _, j := range jobs {
		if rec := s.record(t, j.id); rec == nil || rec.Status.Terminal() {
			t.Fatalf("job %s ended before the worker was killed; the scenario needs longer tasks", j.id)
		}
	}
	s.startWorker(t, "worker-heir")

	ended := s.awaitEnded(t, jobs, within)
	s.checkSucceeded(t, jobs, ended)
	for _, j := range jobs {
		if rec := s.record(t, j.id); rec == nil || rec.Attempts < 2 || rec.Worker != "worker-heir" {
			t.Errorf("job %s: record %+v; want it resumed by worker-heir", j.id, rec)
		}
	}
}
