package containertest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"

	"github.com/sluice-dev/sluice/internal/contract"
	"github.com/sluice-dev/sluice/internal/events"
	"github.com/sluice-dev/sluice/internal/state"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// job is a spec a test publishes, and the name upstream counts its paid
// submissions under (a video prompt, a speech text, a compute job name).
type job struct {
	id, kind string
	spec     map[string]any
	paidAs   string
}

func videoJob(id, prompt string, media ...map[string]string) job {
	input := map[string]any{"prompt": prompt}
	params := map[string]any{"resolution": "768P", "duration": 5}
	if len(media) > 0 {
		input["media"] = media
	} else {
		params["ratio"] = "16:9"
	}
	return job{id: id, kind: "video", paidAs: prompt, spec: map[string]any{
		"id": id, "kind": "video", "labels": map[string]string{"suite": "containers"},
		"video": map[string]any{"model": "video-model", "input": input, "parameters": params},
	}}
}

func speechJob(id, text, mode string) job {
	return job{id: id, kind: "speech", paidAs: text, spec: map[string]any{
		"id": id, "kind": "speech",
		"speech": map[string]any{"model": "speech-model", "mode": mode, "input": map[string]any{"text": text, "voice": "alloy"}},
	}}
}

// computeJob puts script and an input file into the bucket and returns a
// job that uploads both to the cluster, runs the script and collects
// result.dat and params-copy.nml besides stdout and stderr.
func (s *stack) computeJob(t *testing.T, id, script string) job {
	t.Helper()
	s.put(t, "scripts/"+id+".sh", script)
	s.put(t, "inputs/params.nml", "alpha=1\n")
	dir := "/public/home/" + computeUser + "/" + id
	return job{id: id, kind: "compute", paidAs: id, spec: map[string]any{
		"id": id, "kind": "compute",
		"compute": map[string]any{
			"template": map[string]string{"type": "BASIC", "name": "BASE"},
			"job": map[string]any{
				"name": id, "queue": "normal", "nodes": 1, "ppn": 4, "wall_time": "00:10:00",
				"work_dir": dir, "script": dir + "/" + id + ".sh",
			},
			"inputs": []map[string]any{
				{"from": "s3://" + bucket + "/scripts/" + id + ".sh", "to": dir, "cover": true},
				{"from": "s3://" + bucket + "/inputs/params.nml", "to": dir, "cover": true},
			},
			"outputs": []string{dir + "/result.dat", dir + "/params-copy.nml"},
		},
	}}
}

// put stores an object in the bucket.
func (s *stack) put(t *testing.T, key, body string) {
	t.Helper()
	_, err := s.s3Client(t).PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body),
	})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// publish publishes each job to its kind's subject with Nats-Msg-Id = id.
func (s *stack) publish(t *testing.T, jobs ...job) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, j := range jobs {
		data, err := json.Marshal(j.spec)
		if err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg(contract.JobSubject(j.kind))
		m.Data = data
		m.Header.Set(contract.HeaderMsgID, j.id)
		if _, err := s.conn().js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish %s: %v", j.id, err)
		}
	}
}

// events returns every event in SLUICE_EVENTS, in order; nil when it
// cannot be read (NATS restarting).
func (s *stack) events(t *testing.T) []events.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := s.conn().js.Stream(ctx, contract.EventsStream)
	if err != nil {
		return nil
	}
	info, err := stream.Info(ctx)
	if err != nil || info.State.Msgs == 0 {
		return nil
	}
	var out []events.Event
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			return nil
		}
		var ev events.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Fatalf("event %d is not JSON: %v", seq, err)
		}
		if _, seen := checkedEvents.LoadOrStore(checkedEvent{s, seq}, true); !seen {
			eventChecker(t).Check(t, m.Subject, m.Header, m.Data)
		}
		out = append(out, ev)
	}
	return out
}

// Every event is checked once as a subscriber would: with the CloudEvents
// SDK and the published schema (testenv.EventChecker).
var (
	checkedEvents    sync.Map // checkedEvent -> true
	eventCheckerOnce sync.Once
	eventCheckerVal  *testenv.EventChecker
)

type checkedEvent struct {
	s   *stack
	seq uint64
}

func eventChecker(t *testing.T) *testenv.EventChecker {
	eventCheckerOnce.Do(func() { eventCheckerVal = testenv.NewEventChecker(t) })
	return eventCheckerVal
}

// terminal returns every terminal event by job id.
func (s *stack) terminal(t *testing.T) map[string][]events.Event {
	t.Helper()
	out := map[string][]events.Event{}
	for _, ev := range s.events(t) {
		if state.Status(ev.Data.Status).Terminal() {
			out[ev.Subject] = append(out[ev.Subject], ev)
		}
	}
	return out
}

// awaitEnded waits until every job has a terminal event and returns them.
func (s *stack) awaitEnded(t *testing.T, jobs []job, within time.Duration) map[string]events.Event {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ended := s.terminal(t)
		var open []string
		for _, j := range jobs {
			if len(ended[j.id]) == 0 {
				open = append(open, j.id)
			}
		}
		if len(open) == 0 {
			out := map[string]events.Event{}
			for _, j := range jobs {
				out[j.id] = ended[j.id][0]
			}
			return out
		}
		if time.Now().After(deadline) {
			for _, id := range open {
				t.Errorf("job %s: no terminal event within %s; record %+v", id, within, s.record(t, id))
			}
			t.FailNow()
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// awaitRecords waits until ok holds for the state record of every job.
func (s *stack) awaitRecords(t *testing.T, jobs []job, within time.Duration, ok func(*state.Record) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if !slices.ContainsFunc(jobs, func(j job) bool { rec := s.record(t, j.id); return rec == nil || !ok(rec) }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the jobs' records did not reach the awaited step within %s", within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// anyRecord waits until ok holds for the state record of some job.
func (s *stack) anyRecord(t *testing.T, jobs []job, within time.Duration, ok func(*state.Record) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !slices.ContainsFunc(jobs, func(j job) bool { rec := s.record(t, j.id); return rec != nil && ok(rec) }) {
		if time.Now().After(deadline) {
			t.Fatalf("no job's record reached the awaited step within %s", within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// record returns id's state record, nil when there is none (yet).
func (s *stack) record(t *testing.T, id string) *state.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := s.conn().js.KeyValue(ctx, contract.StateBucket)
	if err != nil {
		return nil
	}
	rec, _, err := state.NewStore(kv, "", nil).Get(ctx, id)
	if err != nil {
		return nil
	}
	return rec
}

// checkSucceeded asserts what every scenario ends with: each job has
// exactly one terminal event and it is succeeded, upstream was paid once
// per job, and every artifact in the bucket has the size, sha256 and
// Content-Type its event gives.
func (s *stack) checkSucceeded(t *testing.T, jobs []job, ended map[string]events.Event) {
	t.Helper()
	all := s.terminal(t)
	for _, j := range jobs {
		if n := len(all[j.id]); n != 1 {
			t.Errorf("job %s has %d terminal events, want 1", j.id, n)
		}
		ev := ended[j.id]
		if ev.Data.Status != string(state.StatusSucceeded) {
			t.Errorf("job %s ended %s: %+v", j.id, ev.Data.Status, ev.Data.Error)
			continue
		}
		if n := s.sim.submits(j.paidAs); n != 1 {
			t.Errorf("job %s was submitted upstream %d times, want 1", j.id, n)
		}
		if len(ev.Data.Artifacts) == 0 {
			t.Errorf("job %s succeeded without artifacts", j.id)
		}
		for _, a := range ev.Data.Artifacts {
			s.checkObject(t, a)
		}
	}
}

func sha(r io.Reader) string {
	h := sha256.New()
	_, _ = io.Copy(h, r)
	return hex.EncodeToString(h.Sum(nil))
}

// checkObject reads an artifact back from the bucket.
func (s *stack) checkObject(t *testing.T, a state.Artifact) {
	t.Helper()
	out, err := s.s3Client(t).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(a.Bucket), Key: aws.String(a.Key)})
	if err != nil {
		t.Errorf("get %s: %v", a.Key, err)
		return
	}
	defer out.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, out.Body)
	if err != nil {
		t.Errorf("read %s: %v", a.Key, err)
		return
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if n != a.Size || sum != a.SHA256 || out.Metadata["sha256"] != sum || aws.ToString(out.ContentType) != a.ContentType {
		t.Errorf("object %s: %d bytes, sha256 %s, metadata %v, Content-Type %q; the event says %+v",
			a.Key, n, sum, out.Metadata, aws.ToString(out.ContentType), a)
	}
}
